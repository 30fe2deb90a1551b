package libvirtx

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// Remote procedure numbers (libvirt's src/remote/remote_protocol.x) of the
// calls LibvirtHost makes, and their names for the test's messages.
var remoteProcs = map[int]string{
	9:   "domain_create",
	196: "domain_create_with_flags",
	11:  "domain_define_xml",
	14:  "domain_get_xml_desc",
	23:  "domain_lookup_by_name",
	24:  "domain_lookup_by_uuid",
	150: "domain_is_active",
	273: "connect_list_all_domains",
}

// remoteProgram is libvirt's REMOTE_PROGRAM (0x20008086); keepalive and
// event messages belong to other programs or are not calls.
const remoteProgram = "536903814"

var txQueue = regexp.MustCompile(`RPC_CLIENT_MSG_TX_QUEUE: .* prog=(\d+) vers=\d+ proc=(\d+) type=0 `)

// rpcLog reads the remote calls libvirt's client library logged (its
// rpc.netclient probes) since the last read.
type rpcLog struct {
	f *os.File
}

func (l *rpcLog) calls(t *testing.T) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(l.f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := txQueue.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != remoteProgram {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		name, ok := remoteProcs[n]
		if !ok {
			name = "proc " + m[2]
		}
		out = append(out, name)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHostRoundTrips counts the calls that reach libvirtd (test driver in
// the shared libvirtd, test+unix://) for what a start job asks of the host:
// look the stopped domain up, redefine it, start it, read its live
// definition. Every call is a round trip to libvirtd and a wake-up of the
// event loop on both sides. The handle cache saves the lookups by UUID of
// start and live XML, and a handle's id says whether the domain runs
// (no virDomainIsActive). The calls are read from libvirt's own client log,
// so the test runs itself again in a child process with logging on.
func TestHostRoundTrips(t *testing.T) {
	testenv.NeedLibvirtd(t)
	logPath := os.Getenv("VMPX_RPC_LOG")
	if logPath == "" {
		logPath = filepath.Join(t.TempDir(), "rpc.log")
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostRoundTrips$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "VMPX_RPC_LOG="+logPath,
			"LIBVIRT_LOG_FILTERS=1:rpc.netclient 4:*", "LIBVIRT_LOG_OUTPUTS=1:file:"+logPath)
		out, err := cmd.CombinedOutput()
		t.Logf("child:\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestHostRoundTrips") {
			t.Fatalf("child test: %v", err)
		}
		return
	}

	abs, err := filepath.Abs(filepath.Join("testdata", "node.xml"))
	if err != nil {
		t.Fatal(err)
	}
	h := openTestHost(t, "test+unix://"+abs)
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatalf("libvirt's client log: %v (LIBVIRT_LOG_OUTPUTS not honoured?)", err)
	}
	defer f.Close()
	lg := &rpcLog{f: f}
	if c := lg.calls(t); len(c) == 0 {
		t.Fatalf("no remote calls logged while connecting: is rpc.netclient logging on?")
	}
	ctx := context.Background()
	expect := func(step string, want ...string) {
		t.Helper()
		if got := lg.calls(t); !slices.Equal(got, want) {
			t.Errorf("%s: calls to libvirtd = %q, want %q", step, got, want)
		}
	}

	def, err := h.DefineXML(ctx, `<domain type='test'><name>vmpx-rpc</name><memory>8192</memory><os><type>hvm</type></os></domain>`)
	if err != nil {
		t.Fatal(err)
	}
	if def.Active {
		t.Errorf("DefineXML: Active = true for a new domain")
	}
	expect("DefineXML", "domain_define_xml", "domain_get_xml_desc")
	uuid := def.UUID

	d, err := h.Domain(ctx, "vmpx-rpc")
	if err != nil || d.UUID != uuid || d.Active {
		t.Fatalf("Domain(name) = %+v, %v; want %s, not active", d, err, uuid)
	}
	expect("Domain by name, stopped", "domain_lookup_by_name", "domain_get_xml_desc")

	if err := Redefine(ctx, h, d.InactiveXML); err != nil {
		t.Fatal(err)
	}
	expect("Redefine", "domain_define_xml")

	if err := h.Start(ctx, uuid); err != nil {
		t.Fatal(err)
	}
	expect("Start by UUID after a lookup", "domain_create_with_flags")

	if _, err := h.LiveXML(ctx, uuid); err != nil {
		t.Fatal(err)
	}
	expect("LiveXML", "domain_get_xml_desc")

	// Domain always asks libvirtd: the state must be the current one.
	d, err = h.Domain(ctx, uuid)
	if err != nil || !d.Active {
		t.Fatalf("Domain(uuid) after Start = %+v, %v; want active", d, err)
	}
	expect("Domain by UUID, running", "domain_lookup_by_uuid", "domain_get_xml_desc")

	doms, err := h.ListDomains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"connect_list_all_domains"}
	for _, x := range doms {
		if !x.Active {
			t.Errorf("ListDomains: %s not active", x.Name)
		}
		want = append(want, "domain_get_xml_desc")
	}
	expect("ListDomains", want...)

	// Undefined: the cached handle goes with the event, and a call by UUID
	// looks the domain up again (and fails as before).
	if err := h.Destroy(ctx, uuid); err != nil {
		t.Fatal(err)
	}
	if err := h.Undefine(ctx, uuid); err != nil {
		t.Fatal(err)
	}
	lg.calls(t)
	waitEvent(t, h, isEvent(EventUndefined, uuid), "undefined")
	if err := h.Start(ctx, uuid); !IsNotFound(err) {
		t.Fatalf("Start of an undefined domain = %v, want not found", err)
	}
	// lookup's fallback: a domain may be named like a UUID
	expect("Start of an undefined domain", "domain_lookup_by_uuid", "domain_lookup_by_name")
}
