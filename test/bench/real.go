package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// realResult is what the real-domain benchmark measured.
type realResult struct {
	domain       string
	agent, virsh samples // job drop -> result (domain running); virsh start
	build        samples // the agent's payload build per job (vmpayload_build_seconds)
}

const realURI = "qemu:///system"

// realDomainXML is a tiny TCG domain with no disk: it boots into SeaBIOS
// and stays there, which is enough to be "running".
func realDomainXML(name string) string {
	return testenv.Domain{Name: name, MemoryMiB: 64, Boot: "cdrom", Devices: "<video><model type='none'/></video>"}.XML()
}

func virsh(args ...string) error {
	_, err := testenv.Virsh(context.Background(), realURI, args...)
	return err
}

// realDomain alternates, rounds times, between a plain `virsh start` of the
// stopped domain and a start job dropped into the agent's spool (new content
// each time, so the payload is built every time), on qemu:///system.
func realDomain(bin, work string, rounds int) (rr realResult, err error) {
	rr.domain = fmt.Sprintf("vmpx-bench-%d", os.Getpid())
	// every directory on the image path must be traversable by libvirt-qemu
	dir := filepath.Join(work, "real")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return rr, err
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o011 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
				return rr, err
			}
		}
	}
	xmlPath := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(xmlPath, []byte(realDomainXML(rr.domain)), 0o644); err != nil {
		return rr, err
	}
	if err := virsh("define", xmlPath); err != nil {
		return rr, err
	}
	defer func() {
		_ = virsh("destroy", rr.domain)
		if uerr := virsh("undefine", rr.domain); uerr != nil && err == nil {
			err = uerr
		}
	}()
	a, err := startAgent(bin, realURI, dir, "--log-level", "info")
	if err != nil {
		return rr, err
	}
	defer a.Stop()
	incoming := filepath.Join(a.SpoolDir, "incoming")
	runJob := func(i int) (time.Duration, error) {
		id := fmt.Sprintf("real-%d", i)
		j := makeJob("typical", "nocloud", rr.domain, fmt.Sprintf("real-%d", i))
		j["id"], j["action"] = id, "start"
		tmp := filepath.Join(incoming, "."+id+".tmp")
		if err := os.WriteFile(tmp, jobBytes(j), 0o600); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := os.Rename(tmp, filepath.Join(incoming, id+".json")); err != nil {
			return 0, err
		}
		for time.Since(t0) < 2*time.Minute {
			if r, _, ok := a.ReadResult(id); ok {
				d := time.Since(t0)
				if r.Error != nil {
					return 0, fmt.Errorf("job %s: %s: %s", id, r.Error.Code, r.Error.Message)
				}
				return d, nil
			}
			time.Sleep(time.Millisecond)
		}
		return 0, fmt.Errorf("job %s: no result within 2 minutes", id)
	}
	// warm-up: the first job adds the CD-ROM to the definition
	if _, err := runJob(-1); err != nil {
		return rr, err
	}
	for i := 0; i < rounds; i++ {
		if err := virsh("destroy", rr.domain); err != nil {
			return rr, err
		}
		t0 := time.Now()
		if err := virsh("start", rr.domain); err != nil {
			return rr, err
		}
		rr.virsh = append(rr.virsh, time.Since(t0))
		if err := virsh("destroy", rr.domain); err != nil {
			return rr, err
		}
		b0, err := metric(a, "vmpayload_build_seconds_sum")
		if err != nil {
			return rr, err
		}
		d, err := runJob(i)
		if err != nil {
			return rr, err
		}
		b1, err := metric(a, "vmpayload_build_seconds_sum")
		if err != nil {
			return rr, err
		}
		rr.agent = append(rr.agent, d)
		rr.build = append(rr.build, time.Duration((b1-b0)*float64(time.Second)))
	}
	return rr, nil
}
