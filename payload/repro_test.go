package payload_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// reproEnv names the output directory when the test binary runs as a
// builder child of TestReproducibleAcrossProcesses.
const reproEnv = "VMPAYLOAD_REPRO_OUT"

// reproJobs are built by each child: every format on every medium, with a
// plaintext password (salted deterministically), nested directories
// (config-2) and a MIME multipart user-data.
func reproJobs() map[string]job.Job {
	yes := true
	base := job.Job{
		Version: 1, Domain: "repro-vm", Hostname: "repro.example.com", Timezone: "Europe/Berlin",
		Users:             []job.User{{Name: "alice", Password: "correct horse", Groups: []string{"adm"}}, {Name: "bob", Password: "correct horse"}},
		SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBU9sScwddkdLvHgCn4qYcytsLm/8/Gn/jhDNSszVo+M a@b"},
		SSHPasswordAuth:   &yes,
		NICs:              []job.NIC{{Name: "eth0", MAC: "52:54:00:12:34:56", IPv4: &job.IPConfig{Method: "static", Address: "192.0.2.10/24", Gateway: "192.0.2.1"}}},
		Files:             []job.File{{Path: "/etc/motd", Content: "hello\n"}},
		UserData:          "#!/bin/sh\necho hi\n",
		VendorData:        "#cloud-config\npackages: [jq]\n",
	}
	out := map[string]job.Job{}
	for _, f := range []job.Format{job.FormatNoCloud, job.FormatConfigDrive} {
		for _, m := range []job.Media{job.MediaISO, job.MediaVFAT} {
			j := base
			j.Format, j.Media = f, m
			out[string(f)+"-"+string(m)] = j
		}
	}
	return out
}

// TestMain lets the test binary act as a builder child.
func TestMain(m *testing.M) {
	if dir := os.Getenv(reproEnv); dir != "" {
		if u := os.Getenv("VMPAYLOAD_REPRO_UMASK"); u != "" {
			n, _ := strconv.ParseUint(u, 8, 32)
			syscall.Umask(int(n))
		}
		for name, j := range reproJobs() {
			if _, err := payloadtest.Build(context.Background(), &j, "", filepath.Join(dir, name), payload.Options{GID: -1, NoSync: true}); err != nil {
				os.Stderr.WriteString("build " + name + ": " + err.Error() + "\n")
				os.Exit(3)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReproducibleAcrossProcesses builds every format x media in two
// separate processes more than a second apart, with different time zones,
// umasks, workspace file systems (disk vs tmpfs), SOURCE_DATE_EPOCH and,
// when run as root, a different uid/gid, and requires identical bytes.
func TestReproducibleAcrossProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		env  []string
		cred *syscall.Credential
	}
	diskTmp := t.TempDir()
	runs := []run{
		{env: []string{"TZ=UTC", "VMPAYLOAD_REPRO_UMASK=022", "TMPDIR=" + diskTmp}},
		{env: []string{"TZ=Asia/Kolkata", "VMPAYLOAD_REPRO_UMASK=077", "SOURCE_DATE_EPOCH=1234567890"}},
	}
	if os.Geteuid() == 0 {
		// The go test binary sits in a root-only build directory: give the
		// other user a copy it can execute.
		bin := testenv.TempDir(t, "", "vmpayload-repro-bin-", 0)
		b, err := os.ReadFile(exe)
		if err == nil {
			err = os.Chmod(bin, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(bin, "payload.test"), b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		exe = filepath.Join(bin, "payload.test")
		runs[1].cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	var outs []string
	for i, r := range runs {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond) // a different second on every clock
		}
		dir := testenv.TempDir(t, "", "vmpayload-repro-", 0o777)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(filteredEnv(), reproEnv+"="+dir)
		cmd.Env = append(cmd.Env, r.env...)
		if r.cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			if r.cred != nil {
				// the test binary may not be reachable by nobody; fall back
				t.Logf("builder as uid %d failed (%v: %s); retrying as ourselves", r.cred.Uid, err, out)
				cmd = exec.Command(exe, "-test.run=^$")
				cmd.Env = append(append(filteredEnv(), reproEnv+"="+dir), r.env...)
				out, err = cmd.CombinedOutput()
			}
			if err != nil {
				t.Fatalf("builder %d: %v\n%s", i, err, out)
			}
		}
		outs = append(outs, dir)
	}
	for name := range reproJobs() {
		a, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(outs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			n := 0
			for n < min(len(a), len(b)) && a[n] == b[n] {
				n++
			}
			t.Errorf("%s: builds differ (%d vs %d bytes, first difference at byte %d)", name, len(a), len(b), n)
		} else {
			t.Logf("%s: %d bytes identical", name, len(a))
		}
	}
}

// filteredEnv is the environment without the variables a run sets itself.
func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := bytes.Cut([]byte(kv), []byte("=")); string(k) {
		case "TZ", "TMPDIR", "SOURCE_DATE_EPOCH", reproEnv:
			continue
		}
		env = append(env, kv)
	}
	return env
}
