package guest

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// runReportScript runs the real in-image report script on the host, with
// its output redirected to a file, and returns the log.
func runReportScript(t *testing.T, env ...string) []byte {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script := testenv.RepoPath("test", "guest", "image", "report")
	out := filepath.Join(t.TempDir(), "serial.log")
	cmd := exec.Command("/usr/bin/python3", script)
	cmd.Env = append(os.Environ(), append([]string{"VMPX_REPORT_OUT=" + out}, env...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("report script: %v\n%s", err, b)
	}
	log, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

func TestReportScriptRoundTrip(t *testing.T) {
	log := runReportScript(t)
	reps, err := ParseReports(log)
	if err != nil {
		t.Fatalf("ParseReports: %v", err)
	}
	if len(reps) != 1 {
		t.Fatalf("got %d reports, want 1", len(reps))
	}
	r := reps[0]
	host, _ := os.Hostname()
	me, _ := user.Current()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"hostname", r.Hostname, host},
		{"boot id", r.Meta.BootID, strings.TrimSpace(string(boot))},
		{"current user in passwd", func() bool { _, ok := r.User(me.Username); return ok }(), true},
		{"root group", func() bool { g, ok := r.Group("root"); return ok && g.GID == 0 }(), true},
		{"loopback present", func() bool {
			for _, l := range r.Links {
				if l.Name == "lo" && l.HasAddr("127.0.0.1", 8) {
					return true
				}
			}
			return false
		}(), true},
		{"has sections", len(r.SectionNames()) > 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestReportScriptFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	content := []byte("hello from the host\n")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), content, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	reps, err := ParseReports(runReportScript(t, "VMPX_REPORT_PATHS="+dir))
	if err != nil || len(reps) != 1 {
		t.Fatalf("ParseReports: %v (%d reports)", err, len(reps))
	}
	r := reps[0]
	tests := []struct {
		path, typ, mode, target string
		content                 []byte
	}{
		{dir, "dir", "750", "", nil},
		{filepath.Join(dir, "a.txt"), "file", "640", "", content},
		{filepath.Join(dir, "link"), "symlink", "777", "a.txt", nil},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			f, ok := r.File(tc.path)
			if !ok {
				t.Fatalf("%s not in report", tc.path)
			}
			if f.Type != tc.typ || f.Mode != tc.mode || f.Target != tc.target {
				t.Errorf("got %+v, want type %s mode %s target %q", f, tc.typ, tc.mode, tc.target)
			}
			if tc.content != nil {
				got, ok := f.Content()
				if !ok || !bytes.Equal(got, tc.content) {
					t.Errorf("content %q, want %q", got, tc.content)
				}
				if f.Size != int64(len(tc.content)) || len(f.SHA256) != 64 {
					t.Errorf("size %d sha %q", f.Size, f.SHA256)
				}
			}
		})
	}
}

func TestParseReports(t *testing.T) {
	good := runReportScript(t)
	lines := strings.Split(string(good), "\n")
	// Index of the first multi-chunk line of a section.
	var midChunk int
	for i, l := range lines {
		if strings.HasPrefix(l, "VMPX ") && strings.Contains(l, " 1/") && !strings.Contains(l, " 1/1 ") {
			midChunk = i + 1
			break
		}
	}
	if midChunk == 0 {
		t.Fatal("report has no multi-chunk section to test with")
	}
	hostLine := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "VMPX hostname 1/1 ") {
			hostLine = i
		}
	}
	drop := func(i int) string {
		return strings.Join(append(append([]string{}, lines[:i]...), lines[i+1:]...), "\n")
	}
	tests := []struct {
		name    string
		log     string
		reports int
		wantErr string
	}{
		{"clean", string(good), 1, ""},
		{"with console noise and CRLF", "[    1.0] kernel: hello\r\n" + strings.ReplaceAll(string(good), "\n", "\r\n") + "login: ", 1, ""},
		{"two boots", string(good) + string(good), 2, ""},
		{"truncated: no end marker", strings.Join(lines[:len(lines)/2], "\n"), 0, ""},
		{"lost chunk", drop(midChunk), 0, "out of order"},
		{"lost section", drop(hostLine), 0, "VMPX-END says"},
		{"corrupt base64", strings.Replace(string(good), "VMPX hostname 1/1 ", "VMPX hostname 1/1 !!", 1), 0, "base64"},
		{"empty", "", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reps, err := ParseReports([]byte(tc.log))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if len(reps) != tc.reports {
				t.Fatalf("got %d reports, want %d", len(reps), tc.reports)
			}
		})
	}
}

// TestParseReportsWhileWritten reads a log of two boots cut short, at every
// byte near the end of a line and at others, as a poll of the serial log can
// find it while the guest writes: never an
// error, no report before the first end marker's line is whole, one after it,
// two at the end.
func TestParseReportsWhileWritten(t *testing.T) {
	one := runReportScript(t)
	log := append(append([]byte("[    1.0] kernel: booting\r\n"), one...), one...)
	end1 := bytes.Index(log, []byte("VMPX-END "))
	end1 += bytes.IndexByte(log[end1:], '\n') + 1 // just past the first end marker's newline
	// every cut within 40 bytes before a newline (where a line is cut
	// short) and one in 61 elsewhere; parsing every cut of the log would
	// take seconds
	var cuts []int
	for cut := 0; cut <= len(log); cut++ {
		if cut%61 == 0 || cut == len(log) || bytes.IndexByte(log[cut:min(cut+41, len(log))], '\n') >= 0 {
			cuts = append(cuts, cut)
		}
	}
	for _, cut := range cuts {
		reps, err := ParseReports(log[:cut])
		if err != nil {
			t.Fatalf("log cut at byte %d of %d (%q): %v", cut, len(log), tailBytes(log[:cut], 30), err)
		}
		want := 0
		switch {
		case cut == len(log):
			want = 2
		case cut >= end1:
			want = 1
		}
		if len(reps) != want {
			t.Fatalf("log cut at byte %d of %d: %d reports, want %d", cut, len(log), len(reps), want)
		}
	}
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func TestWaitReportTimeoutShowsTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "serial.log")
	if err := os.WriteFile(p, []byte("booting\nsomething went wrong here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := WaitReport(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "something went wrong here") {
		t.Fatalf("error %v, want one carrying the serial log tail", err)
	}
}

func TestDomainXML(t *testing.T) {
	img := &Image{Suite: "bookworm", Dir: t.TempDir(), Base: "/b/base.raw", Kernel: "/b/vmlinuz", Initrd: "/b/initrd.img"}
	g := &Guest{Name: "vmpx-e2e-x", Image: img, Overlay: "/d/root.qcow2", SerialLog: "/d/serial.log",
		Options: Options{Machine: "q35", VCPUs: 2, MemoryMiB: 1024, DomainType: "qemu", ExtraCmdline: "vmpx.poweroff=0",
			NICs: []NIC{{MAC: "52:54:00:00:00:01", Model: "virtio"}}}}
	plain, err := g.XML()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		bus     string
		want    []string
		notWant []string
		wantErr bool
	}{
		{"no cdrom", "", []string{`<domain type="qemu">`, `machine="q35"`, "console=ttyS0 root=/dev/vda rw vmpx.poweroff=0",
			`<interface type="ethernet">`, `<mac address="52:54:00:00:00:01">`, `<serial type="file">`, "<on_poweroff>destroy</on_poweroff>", "<acpi></acpi>"},
			[]string{`device="cdrom"`}, false},
		{"sata", BusSATA, []string{`device="cdrom"`, `bus="sata"`, `<readonly></readonly>`}, nil, false},
		{"scsi", BusSCSI, []string{`bus="scsi"`, `model="virtio-scsi"`}, nil, false},
		{"ide on q35", BusIDE, nil, nil, true},
		{"bogus bus", "usb", nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := plain
			if tc.bus != "" {
				x, err = g.XMLWithCDROM("/d/seed.iso", tc.bus)
				if (err != nil) != tc.wantErr {
					t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
				}
				if err != nil {
					return
				}
			}
			testenv.Contains(t, "XML", x, tc.want, tc.notWant)
		})
	}
}

// TestKernelPanicked: only a panic in the boot that has not reported yet
// counts; WaitReport stops at it instead of waiting out its deadline.
func TestKernelPanicked(t *testing.T) {
	const panicLine = "[    2.631468] Kernel panic - not syncing: Fatal exception in interrupt\r\n"
	const report = "VMPX-BEGIN 1 b\r\nVMPX meta 1/1 e30=\r\nVMPX-END 1\r\n"
	for _, tc := range []struct {
		name string
		log  string
		want bool
	}{
		{"booting", "[    0.000000] Linux version 6.12\r\n", false},
		{"panic in the first boot", "[    0.000000] Linux version 6.12\r\n" + panicLine, true},
		{"panic after a report", report + "[    0.000000] Linux version 6.12\r\n" + panicLine, true},
		{"panic before the last report", panicLine + report, false},
		{"other oops text", "[    2.6] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\r\n", false},
	} {
		if got := KernelPanicked([]byte(tc.log)); got != tc.want {
			t.Errorf("%s: KernelPanicked = %v, want %v", tc.name, got, tc.want)
		}
	}
	p := filepath.Join(t.TempDir(), "serial.log")
	if err := os.WriteFile(p, []byte("[    0.000000] Linux version 6.12\r\n"+panicLine), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := WaitReport(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "kernel panicked") {
		t.Fatalf("error %v, want a kernel panic", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("WaitReport waited out its deadline (%v) instead of stopping at the panic", time.Since(start))
	}
}

// TestReportSums: Sums reads a sha256sum listing of "./" paths into sums
// by path; other lines, and a missing file, give nothing.
func TestReportSums(t *testing.T) {
	listing := "aa  ./a\nbb  ./d/b\nnot a sum line\n"
	r := &Report{Files: []File{{Path: "/l", Type: "file", Size: int64(len(listing)), ContentB64: base64.StdEncoding.EncodeToString([]byte(listing))}}}
	if got, want := r.Sums("/l"), map[string]string{"a": "aa", "d/b": "bb"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Sums = %v, want %v", got, want)
	}
	if got := r.Sums("/missing"); len(got) != 0 {
		t.Errorf("Sums of a missing file = %v", got)
	}
}
