package cloudinit

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestJobHashesAreMarshalHashes checks that splicing big contents in gives
// the SHA-256 of json.Marshal of the whole job (the content and instance
// hashes recipes and instance-ids depend on), for contents encoding/json
// escapes in every way it can.
func TestJobHashesAreMarshalHashes(t *testing.T) {
	odd := "<script>&\"quote\" \\ back\u2028\u2029 \x01\x1f\t\n\r\b\f é ☃ \U0001F600 \xff\xfe invalid"
	small := job.Job{Version: 1, Format: "nocloud", Hostname: "h"}
	withFiles := func(contents ...string) job.Job {
		j := small
		for i, c := range contents {
			j.Files = append(j.Files, job.File{Path: "/f" + string(rune('a'+i)), Content: c, Permissions: "0644"})
		}
		return j
	}
	cases := map[string]job.Job{
		"no files":    small,
		"small files": withFiles("a", "b"),
		"big and odd": withFiles(strings.Repeat(odd, 200), "small", strings.Repeat("x", bigHashContent), strings.Repeat("y", bigHashContent-1)),
		"200 big": withFiles(func() []string {
			l := make([]string, 200)
			for i := range l {
				l[i] = strings.Repeat("line\n", 1000)
			}
			return l
		}()...),
		"placeholder-like content": withFiles(strings.Repeat("vmpayload-hash-", 100), `"vmpayload-hash-00-0"`),
	}
	for name, j := range cases {
		other := j
		other.Format, other.GuestReport = "", nil
		got, err := jobHashes(j, other)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k, v := range []job.Job{j, other} {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if want := hex.EncodeToString(sum[:]); got[k] != want {
				t.Errorf("%s: hash %d = %s, SHA-256 of json.Marshal is %s", name, k, got[k], want)
			}
		}
		if len(j.Files) > 0 && got[0] == got[1] {
			t.Errorf("%s: the two jobs differ but hash alike", name)
		}
	}
}

// TestEncodeBase64 compares encodeBase64To with encoding/base64: every
// length up to 3000 with random bytes, sizes around its six-byte step and
// the padding, and every twelve-bit value in both halves of a three-byte
// group (every entry of its pair table, at every offset of the step).
func TestEncodeBase64(t *testing.T) {
	check := func(what string, s string) {
		t.Helper()
		b := make([]byte, base64.StdEncoding.EncodedLen(len(s)))
		encodeBase64To(b, s)
		if got, want := string(b), base64.StdEncoding.EncodeToString([]byte(s)); got != want {
			t.Errorf("%s (%d bytes): differs from base64.StdEncoding", what, len(s))
		}
	}
	rng := rand.New(rand.NewSource(64))
	for n := 0; n <= 3000; n++ {
		b := make([]byte, n)
		rng.Read(b)
		check("random", string(b))
	}
	for _, n := range []int{3071, 3072, 3073, 3074, 6144, 10000, 1 << 20} {
		check("text", strings.Repeat("ab\x00\xffé", n/6+1)[:n])
	}
	var all []byte
	for i := 0; i < 4096; i++ {
		v := i<<12 | (4095 - i)
		all = append(all, byte(v>>16), byte(v>>8), byte(v))
	}
	for pad := 0; pad < 6; pad++ {
		check("every pair", strings.Repeat("x", pad)+string(all))
	}
}

// TestAppendJSONString compares appendJSONString with json.Marshal on fixed
// and generated strings: every byte value, runes around the escapes,
// invalid UTF-8, at every offset of an eight-byte block.
func TestAppendJSONString(t *testing.T) {
	check := func(s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, json.Marshal gives %s", s, got, want)
		}
	}
	var all []byte
	for b := 0; b < 256; b++ {
		all = append(all, byte(b))
	}
	check(string(all))
	for _, s := range []string{"", "plain", "a\u2028b\u2029c\u2027", "\xe2\x80", "é☃\U0001F600\xed\xa0\x80", "<a href=\"x\">&amp;</a>"} {
		for pad := 0; pad < 9; pad++ {
			check(strings.Repeat("x", pad) + s + strings.Repeat("y", pad))
		}
	}
	pieces := []string{"a", "abcdefgh", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xc3", "\U0001F600", " "}
	rng := rand.New(rand.NewSource(14))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := rng.Intn(30); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		check(b.String())
	}
}

// BenchmarkJobHashes hashes a job with 200 files of 5000 bytes (the
// benchmark's large job) both ways the render does.
func BenchmarkJobHashes(b *testing.B) {
	body := strings.Repeat(strings.Repeat("abcdefghij", 9)+"-bench-\n", 52)[:5000]
	j := job.Job{Version: 1, Format: "nocloud", Hostname: "bench-01"}
	for i := 0; i < 200; i++ {
		j.Files = append(j.Files, job.File{Path: "/srv/data/f" + strings.Repeat("x", i%7), Content: body})
	}
	other := j
	other.Format = ""
	b.SetBytes(int64(2 * 200 * len(body)))
	for i := 0; i < b.N; i++ {
		if _, err := jobHashes(j, other); err != nil {
			b.Fatal(err)
		}
	}
}
