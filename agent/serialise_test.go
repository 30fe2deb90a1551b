package agent_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
)

// heldDefine holds the first DefineXML of the domain named hold until the
// test releases it (a job for that domain stays in the middle of changing
// it meanwhile), and records whether another define of that domain began
// while one was under way.
type heldDefine struct {
	*libvirtx.LibvirtHost
	hold    string
	held    chan struct{} // closed when the define is held
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	running int
	overlap bool
}

func (h *heldDefine) DefineXML(ctx context.Context, xml string) (libvirtx.DomainInfo, error) {
	if !strings.Contains(xml, "<name>"+h.hold+"</name>") {
		return h.LibvirtHost.DefineXML(ctx, xml)
	}
	h.mu.Lock()
	h.running++
	if h.running > 1 {
		h.overlap = true
	}
	h.mu.Unlock()
	h.once.Do(func() {
		close(h.held)
		<-h.release
	})
	d, err := h.LibvirtHost.DefineXML(ctx, xml)
	h.mu.Lock()
	h.running--
	h.mu.Unlock()
	return d, err
}

// Redefine is the engine's define of an existing domain
// (libvirtx.Redefiner): held the same way.
func (h *heldDefine) Redefine(ctx context.Context, xml string) error {
	_, err := h.DefineXML(ctx, xml)
	return err
}

func (h *heldDefine) overlapped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.overlap
}

// TestJobsSerialisedByDomainUUID: jobs for one domain are serialised by the
// domain's UUID, whatever spelling the job uses: while a job naming the
// domain is in the middle of changing it, a job giving its UUID does not
// change it (nor finish), even though a later job for another domain runs
// and finishes on a free worker. Two domains whose names differ only in case are two domains:
// neither waits for the other.
func TestJobsSerialisedByDomainUUID(t *testing.T) {
	cases := []struct {
		name string
		// the held job's domain and the second job's domain
		first, second func(uuid string) string
		// serialised: the second job waits for the first
		serialised bool
	}{
		{"name then UUID", func(string) string { return "ser-Web" }, func(u string) string { return u }, true},
		{"UUID then name", func(u string) string { return u }, func(string) string { return "ser-Web" }, true},
		{"UUID in upper case without dashes", func(string) string { return "ser-Web" }, func(u string) string { return strings.ToUpper(strings.ReplaceAll(u, "-", "")) }, true},
		{"names differing in case", func(string) string { return "ser-Web" }, func(string) string { return "ser-web" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wrap := &heldDefine{hold: "ser-Web", held: make(chan struct{}), release: make(chan struct{})}
			h := startAgentWith(t, "", nil, agentSetup{wrap: func(l *libvirtx.LibvirtHost) libvirtx.Host {
				wrap.LibvirtHost = l
				return wrap
			}})
			released := false
			release := func() {
				if !released {
					released = true
					close(wrap.release)
				}
			}
			defer release()
			var uuid string
			for _, n := range []string{"ser-Web", "ser-web", "ser-other"} {
				d, err := h.host.DefineXML(context.Background(), domainXML(n, "pc", ""))
				if err != nil {
					t.Fatal(err)
				}
				if n == "ser-Web" {
					uuid = d.UUID
				}
			}
			h.drop("first", map[string]any{"version": 1, "id": "first", "domain": c.first(uuid), "action": "attach", "hostname": "a"})
			select {
			case <-wrap.held:
			case <-time.After(60 * time.Second):
				t.Fatal("the first job never redefined its domain")
			}
			h.drop("second", map[string]any{"version": 1, "id": "second", "domain": c.second(uuid), "action": "attach", "hostname": "b"})
			waitState(t, h, "second", func(s result.State) bool { return s != "" })
			// a later job for another domain: with a free worker it runs
			// after the second job was handed out, if the second was not
			// held back
			h.drop("other", map[string]any{"version": 1, "id": "other", "domain": "ser-other", "action": "attach", "hostname": "c"})
			if r := h.result("other"); r.State != result.StateDone {
				t.Fatalf("other: %s %+v", r.State, r.Error)
			}
			if c.serialised {
				if r, _ := h.agent.Job("second"); r.State.Final() {
					t.Errorf("second job finished (%s) while the first job changes the same domain", r.State)
				}
			} else {
				// not serialised: it finishes while the first is held
				if r := h.result("second"); r.State != result.StateDone {
					t.Errorf("second: %s %+v", r.State, r.Error)
				}
			}
			if wrap.overlapped() {
				t.Error("the second job redefined the domain while the first job was changing it")
			}
			release()
			for _, id := range []string{"first", "second"} {
				if r := h.result(id); r.State != result.StateDone {
					t.Errorf("%s: %s %+v", id, r.State, r.Error)
				}
			}
			if wrap.overlapped() {
				t.Error("the two jobs redefined the domain at the same time")
			}
		})
	}
}

// waitState waits until the agent knows job id in a state ok accepts.
func waitState(t *testing.T, h *harness, id string, ok func(result.State) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, found := h.agent.Job(id)
		if found && ok(r.State) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: state %q", id, r.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAPIGetsEveryIDItAccepts: GET /v1/jobs/{id} takes every id POST
// accepts (the one job id alphabet, job.ValidID), e.g. "a..b", and refuses
// what is no id.
func TestAPIGetsEveryIDItAccepts(t *testing.T) {
	h := startAgent(t, "", nil)
	c := client.New(h.sock).HTTP()
	resp, err := c.Post("http://x/v1/jobs", "application/json", strings.NewReader(`{"version":1,"id":"a..b","domain":"node-with-payload","hostname":"h","action":"attach"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST id a..b: %d", resp.StatusCode)
	}
	for _, c2 := range []struct {
		path string
		want int
	}{
		{"/v1/jobs/a..b?wait=60s", http.StatusOK},
		{"/v1/jobs/_x", http.StatusBadRequest},
		{"/v1/jobs/.x", http.StatusBadRequest},
	} {
		resp, err := c.Get("http://x" + c2.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c2.want {
			t.Errorf("GET %s: %d, want %d", c2.path, resp.StatusCode, c2.want)
		}
	}
}
