package payload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/job/jobtest"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/golden"
)

// sysprepExamples decodes configs/examples/windows/sysprep*.json.
func sysprepExamples(t *testing.T) map[string]*job.Job {
	return payloadtest.SysprepExamples(t, windowsExamplesDir)
}

// xpath reads expr from the XML file at p with xmllint, an independent
// XML reader (libxml2): the judge of the filled answer file.
func xpath(t *testing.T, p, expr string) string {
	t.Helper()
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatalf("xmllint is missing (install Debian's libxml2-utils; test/deps.sh does): %v", err)
	}
	out, err := exec.Command("xmllint", "--nonet", "--xpath", expr, p).CombinedOutput()
	if err != nil {
		t.Fatalf("xmllint --xpath %s %s: %v\n%s", expr, p, err, out)
	}
	return strings.TrimSuffix(string(out), "\n") // xmllint ends its output with a line end
}

// TestSysprepGolden renders each example sysprep job and compares its
// answer file with the golden file; xmllint reads the rendered file back and
// finds each value where its placeholder was, the password with its XML
// characters intact (escaped in the file, unescaped by the reader).
func TestSysprepGolden(t *testing.T) {
	pw, err := os.ReadFile(filepath.Join(secretsDir, "sysprep-admin-password"))
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimRight(string(pw), "\n")
	if !strings.ContainsAny(password, "&<>\"") {
		t.Fatalf("the example password %q should hold XML's special characters", password)
	}
	for name, j := range sysprepExamples(t) {
		t.Run(name, func(t *testing.T) {
			r, err := payloadtest.Render(j, secretsDir, payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Docs.Files) != 1 || r.Docs.Files[0].Path != r.Job.SysprepFileName {
				t.Fatalf("files %v", r.Docs.Files)
			}
			f := r.Docs.Files[0]
			golden.Compare(t, filepath.Join("testdata", "golden", "windows-"+name, f.Path), f.Data, *update)
			p := filepath.Join(t.TempDir(), f.Path)
			if err := os.WriteFile(p, f.Data, 0o600); err != nil {
				t.Fatal(err)
			}
			ns := `/*[local-name()='unattend' and namespace-uri()='urn:schemas-microsoft-com:unattend']`
			if got := xpath(t, p, "string("+ns+"//*[local-name()='ComputerName'])"); got != j.Hostname {
				t.Errorf("ComputerName %q, want %q", got, j.Hostname)
			}
			if got := xpath(t, p, "string("+ns+"//*[local-name()='Value'])"); got != password {
				t.Errorf("the password reads back as %q, want %q", got, password)
			}
			if got, want := xpath(t, p, "string("+ns+"//*[local-name()='TimeZone'])"), job.SysprepTimezone(&r.Job); got != want || want == "" {
				t.Errorf("TimeZone %q, want %q", got, want)
			}
		})
	}
}

// TestSysprepImages builds each example's image and reads the answer file
// back the way Windows sees it: from the floppy with mtools, from the
// CD-ROM through Joliet (isoinfo -J); the bytes are the rendered file's.
// Two builds give the same bytes.
func TestSysprepImages(t *testing.T) {
	for name, j := range sysprepExamples(t) {
		t.Run(name, func(t *testing.T) {
			r, err := payloadtest.Render(j, secretsDir, payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := filepath.Join(dir, r.ImageName("dom"))
			res, err := r.Write(context.Background(), out, payload.Options{GID: -1, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != string(job.FormatSysprep) || res.Label != payload.LabelSysprep {
				t.Errorf("result format %q label %q", res.Format, res.Label)
			}
			want := r.Docs.Files[0].Data
			name := r.Job.SysprepFileName
			var got []byte
			if r.Job.SysprepMedium == job.MediumFloppy {
				if res.Size != image.FloppySize || res.Media != "vfat" || !strings.HasSuffix(out, ".img") {
					t.Errorf("floppy result %+v", res.Image)
				}
				listing, err := exec.Command("mdir", "-i", out, "::/").CombinedOutput()
				if err != nil || !strings.Contains(string(listing), name) {
					t.Errorf("mdir: %v\n%s", err, listing)
				}
				got, err = exec.Command("mcopy", "-n", "-i", out, "::/"+name, "-").Output()
				if err != nil {
					t.Fatalf("mcopy: %v", err)
				}
			} else {
				if res.Media != "iso" {
					t.Errorf("cdrom result %+v", res.Image)
				}
				got, err = exec.Command("isoinfo", "-J", "-i", out, "-x", "/"+name).Output()
				if err != nil {
					t.Fatalf("isoinfo -J: %v", err)
				}
				listing, _ := exec.Command("isoinfo", "-J", "-l", "-i", out).Output()
				if !strings.Contains(string(listing), name) {
					t.Errorf("the Joliet tree does not name %s:\n%s", name, listing)
				}
			}
			if !bytes.Equal(got, want) {
				t.Errorf("read back %d bytes differing from the rendered %d", len(got), len(want))
			}
			again := filepath.Join(dir, "again")
			res2, err := r.Write(context.Background(), again, payload.Options{GID: -1, NoSync: true})
			if err != nil || res2.SHA256 != res.SHA256 {
				t.Errorf("a second build gives sha256 %s (%v), the first %s", res2.SHA256, err, res.SHA256)
			}
		})
	}
}

// TestSysprepSecretsStayOut: the plaintext password and a secret answer
// file's text reach the image but not the job's content hash, the image
// name or a check's messages.
func TestSysprepSecretsStayOut(t *testing.T) {
	ex := sysprepExamples(t)["sysprep-secret"]
	r, err := payloadtest.Render(ex, secretsDir, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Docs.Files[0].Data), "Adm1n&amp;&lt;") {
		t.Errorf("the escaped password is not in the answer file")
	}
	// a changed password changes the content hash (a new image name)
	dir := payloadtest.SysprepSecrets(t, secretsDir, "another-Pa55")
	r2, err := payloadtest.Render(ex, dir, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Docs.ContentHash == r.Docs.ContentHash {
		t.Errorf("another password gives the same content hash")
	}
	// a broken secret answer file is refused without quoting it
	os.WriteFile(filepath.Join(dir, "sysprep-unattend"), []byte("<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">\n<Value>hunter2</Valu>\n</unattend>\n"), 0o600)
	_, _, rep := payload.Check(mustJSON(t, ex), payload.CheckOptions{Secrets: true, SecretsDir: dir})
	if rep.OK() || !strings.Contains(rep.Err().Error(), "sysprep_secret") || strings.Contains(rep.Err().Error(), "hunter2") {
		t.Errorf("report %v", rep.Err())
	}
	// a password an answer file cannot carry
	os.WriteFile(filepath.Join(dir, "sysprep-unattend"), []byte(ex2text(t)), 0o600)
	os.WriteFile(filepath.Join(dir, "sysprep-admin-password"), []byte("bell\a-secret\n"), 0o600)
	_, _, rep = payload.Check(mustJSON(t, ex), payload.CheckOptions{Secrets: true, SecretsDir: dir})
	if rep.OK() || !strings.Contains(rep.Err().Error(), "admin_password_secret") || strings.Contains(rep.Err().Error(), "bell") {
		t.Errorf("report %v", rep.Err())
	}
}

func ex2text(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(secretsDir, "sysprep-unattend"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustJSON(t *testing.T, j *job.Job) []byte {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkSysprepBuild builds the example sysprep payloads (check with
// the password secret, render, image written to a temporary directory)
// beside the peers of the same media: the nocloud example 04-vfat (a FAT
// image sized from its content), 01-minimal (a cidata ISO) and 11-secrets
// (a cidata ISO with a user's password_secret).
func BenchmarkSysprepBuild(b *testing.B) {
	load := func(p string) *job.Job {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return jobtest.Decoded(b, data)
	}
	for _, c := range []struct{ name, path string }{
		{"sysprep-floppy", filepath.Join(windowsExamplesDir, "sysprep-floppy.json")},
		{"peer-nocloud-vfat", filepath.Join(examplesDir, "04-vfat.json")},
		{"sysprep-cdrom", filepath.Join(windowsExamplesDir, "sysprep-cdrom.json")},
		{"peer-nocloud-iso", filepath.Join(examplesDir, "01-minimal.json")},
		// a password secret costs a SHA-512 crypt in the content hash, as
		// the sysprep administrator password does
		{"peer-nocloud-iso-password-secret", filepath.Join(examplesDir, "11-secrets.json")},
	} {
		j := load(c.path)
		b.Run(c.name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "img")
			for b.Loop() {
				if _, err := payloadtest.Build(context.Background(), j, secretsDir, out, payload.Options{GID: -1, NoSync: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An answer file that the filled placeholders grow past a floppy is
// refused by the check (too_large, nothing built); as a CD-ROM it builds.
func TestSysprepFloppyOverflow(t *testing.T) {
	// each {{timezone}} (12 bytes) becomes "W. Europe Standard Time" (23)
	body := "<t>" + strings.Repeat("{{timezone}} ", 900000/13) + "</t>"
	doc := func(medium string) []byte {
		b, _ := json.Marshal(map[string]any{"version": 1, "format": "sysprep", "sysprep_medium": medium, "timezone": "Europe/Berlin",
			"sysprep": `<unattend xmlns="urn:schemas-microsoft-com:unattend">` + body + `</unattend>`})
		return b
	}
	_, _, rep := payload.Check(doc("floppy"), payload.CheckOptions{Secrets: true, Build: true})
	if rep.OK() || rep.Errors[0].Code != job.CodeTooLarge || !strings.Contains(rep.Errors[0].Message, "1.44 MB floppy") {
		t.Fatalf("floppy: %v", rep.Errors)
	}
	_, c, rep := payload.Check(doc("cdrom"), payload.CheckOptions{Secrets: true, Build: true})
	if !rep.OK() {
		t.Fatal(rep.Err())
	}
	if _, err := payload.Build(context.Background(), c, filepath.Join(t.TempDir(), "x.iso"), payload.Options{GID: -1, NoSync: true}); err != nil {
		t.Fatal(err)
	}
}
