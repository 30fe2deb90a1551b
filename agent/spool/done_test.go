package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// TestEachDone: every result in done/ whose id is its file name's reaches
// fn; damaged files and names that are not their content's go to bad;
// temp files, other names and failed/ are not looked at.
func TestEachDone(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"done/a.json":        `{"id":"a","state":"done","domain_uuid":"u1"}`,
		"done/b.json":        `{"id":"b","state":"done"}`,
		"done/c.json":        `{"id":"c",`,                  // damaged
		"done/d.json":        `{"id":"a","state":"done"}`,   // names another job
		"done/.e.json.1.tmp": `{"id":"e","state":"done"}`,   // a writer's temp file
		"done/.f.json":       `{"id":"f","state":"done"}`,   // hidden
		"done/g.txt":         `{"id":"g","state":"done"}`,   // not a result name
		"failed/h.json":      `{"id":"h","state":"failed"}`, // not done
		"failed/h.job.json":  `{}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(s.Root, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got, bad []string
	err = s.EachDone(context.Background(), func(r result.Result) { got = append(got, r.ID+":"+r.DomainUUID) },
		func(name string, err error) { bad = append(bad, name) })
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	sort.Strings(bad)
	if g, w := strings.Join(got, ","), "a:u1,b:"; g != w {
		t.Errorf("results %q, want %q", g, w)
	}
	if g, w := strings.Join(bad, ","), "c.json,d.json"; g != w {
		t.Errorf("bad %q, want %q", g, w)
	}
	// an ended context stops the reading before the first file
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	if err := s.EachDone(ctx, func(result.Result) { n++ }, nil); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("ended context: err %v after %d results, want context.Canceled after none", err, n)
	}
	if err := os.RemoveAll(s.Dir(Done)); err != nil {
		t.Fatal(err)
	}
	if err := s.EachDone(context.Background(), func(result.Result) {}, nil); err == nil || !strings.Contains(err.Error(), "listing") {
		t.Errorf("done/ missing: err %v, want a listing error", err)
	}
}

// BenchmarkEachDone reads 1000 results like a burst's (payload, device,
// guest section): the cost an agent start pays per 1000 results in done/
// to find the guest report follower's jobs.
func BenchmarkEachDone(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "spool"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for i := 0; i < 1000; i++ {
		r := result.Result{ID: fmt.Sprintf("burst-%04d", i), Domain: fmt.Sprintf("vm-%04d", i), DomainUUID: fmt.Sprintf("5b8e4f1c-0000-4000-8000-%012d", i),
			Action: "start", State: result.StateDone, DomainState: "running", Errors: []job.FieldError{}, Source: result.SourceSpool,
			Payload: &result.Payload{Image: payload.Image{Path: "/run/payload/x.iso", Format: "nocloud", Media: "iso", Label: "cidata", Size: 61440,
				SHA256: strings.Repeat("ab", 32), InstanceID: "iid-" + strings.Repeat("cd", 16)}},
			Device: &result.Device{Bus: "sata", Target: "sdz", Kind: "cdrom"}, ReceivedAt: now, FinishedAt: &now, DurationMS: 3,
			Submitter: &result.Submitter{UID: 1000, User: "user"}, Claim: strings.Repeat("ef", 16),
			Guest: &result.Guest{Status: result.GuestPending, Channel: "org.vmpayload.guest.0", Errors: []string{}, RecoverableErrors: []string{}, StartedAt: &now}}
		if err := s.Complete(&Claimed{Name: r.ID + ".json", Path: filepath.Join(s.Dir(Processing), r.ID+".json")}, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if err := s.EachDone(context.Background(), func(result.Result) { n++ }, nil); err != nil || n != 1000 {
			b.Fatal(n, err)
		}
	}
}
