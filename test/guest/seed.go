package guest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// NoCloudISO writes a NoCloud seed ISO (label cidata) with cloud-localds.
// networkConfig may be empty. The ISO and its directory are made readable
// for libvirt-qemu.
func NoCloudISO(ctx context.Context, iso, userData, metaData, networkConfig string) error {
	dir, err := os.MkdirTemp("", "vmpx-seed-")
	if err != nil {
		return fmt.Errorf("guest: making NoCloud ISO: %w", err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{"user-data": userData, "meta-data": metaData}
	if networkConfig != "" {
		files["network-config"] = networkConfig
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("guest: making NoCloud ISO: %w", err)
		}
	}
	args := []string{}
	if networkConfig != "" {
		args = append(args, "--network-config="+filepath.Join(dir, "network-config"))
	}
	args = append(args, iso, filepath.Join(dir, "user-data"), filepath.Join(dir, "meta-data"))
	if out, err := exec.CommandContext(ctx, "cloud-localds", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("guest: making NoCloud ISO with cloud-localds: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return publish(iso)
}

// ConfigDriveISO writes an ISO labelled config-2 from files (relative path ->
// content, e.g. "openstack/latest/meta_data.json") with
// `genisoimage -J -r -V config-2`.
func ConfigDriveISO(ctx context.Context, iso string, files map[string]string) error {
	dir, err := os.MkdirTemp("", "vmpx-configdrive-")
	if err != nil {
		return fmt.Errorf("guest: making config-2 ISO: %w", err)
	}
	defer os.RemoveAll(dir)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return fmt.Errorf("guest: making config-2 ISO: path %q escapes the tree", n)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("guest: making config-2 ISO: %w", err)
		}
		if err := os.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			return fmt.Errorf("guest: making config-2 ISO: %w", err)
		}
	}
	out, err := exec.CommandContext(ctx, "genisoimage", "-quiet", "-J", "-r", "-V", "config-2", "-o", iso, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("guest: making config-2 ISO with genisoimage: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return publish(iso)
}

func publish(iso string) error {
	if err := os.Chmod(iso, 0o644); err != nil {
		return fmt.Errorf("guest: publishing %s: %w", iso, err)
	}
	if err := MakeTraversable(filepath.Dir(iso)); err != nil {
		return fmt.Errorf("guest: publishing %s: %w", iso, err)
	}
	return nil
}

var (
	accelOnce sync.Once
	accel     string
	accelErr  error
)

// Accel returns the domain type to use: "kvm" when a short probe boot of
// img's kernel under KVM reaches its expected panic, else "qemu" (TCG). The
// probe runs once per host boot (the answer is kept in <cache>/.accel).
// VMPAYLOAD_GUEST_ACCEL=qemu|kvm skips it.
func Accel(ctx context.Context, img *Image) (string, error) {
	if v := os.Getenv("VMPAYLOAD_GUEST_ACCEL"); v == "qemu" || v == "kvm" {
		return v, nil
	}
	accelOnce.Do(func() {
		// The answer holds until the host reboots: remember it per boot id
		// next to the images, so only the first test process pays.
		boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		memo := filepath.Join(filepath.Dir(img.Dir), ".accel")
		key := strings.TrimSpace(string(boot)) + " "
		if b, err := os.ReadFile(memo); err == nil && len(boot) > 0 && strings.HasPrefix(string(b), key) {
			if v := strings.TrimSpace(strings.TrimPrefix(string(b), key)); v == "qemu" || v == "kvm" {
				accel = v
				return
			}
		}
		ok, err := ProbeKVM(ctx, img)
		accel, accelErr = "qemu", err
		if ok {
			accel = "kvm"
		}
		if err == nil && len(boot) > 0 {
			_ = os.WriteFile(memo, []byte(key+accel+"\n"), 0o644)
		}
	})
	return accel, accelErr
}

// ProbeKVM boots img's kernel in a transient <domain type='kvm'> with no
// root disk and "panic=-1": a kernel that works under KVM gets as far as
// "VFS: Unable to mount root fs" and reboots, which on_reboot=destroy turns
// into a clean stop. A KVM emulation failure pauses or crashes the domain
// instead or hangs. Bounded to 45 s (TCG reaches the panic in ~10 s). A missing /dev/kvm is (false, nil).
func ProbeKVM(ctx context.Context, img *Image) (bool, error) {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	g, err := Prepare(ctx, img, Options{Name: NamePrefix + "kvmprobe-" + fmt.Sprint(os.Getpid()), DomainType: "kvm", VCPUs: 1, MemoryMiB: 512,
		ExtraCmdline: "panic=-1 rdinit=/vmpx-none root=/dev/vmpx-none"})
	if err != nil {
		return false, err
	}
	defer g.Cleanup(context.WithoutCancel(ctx))
	d := g.domain()
	d.Devices.Disks = nil
	d.OnReboot = "destroy"
	x, err := marshal(d)
	if err != nil {
		return false, err
	}
	if err := g.Define(ctx, x); err != nil {
		return false, err
	}
	if err := g.Start(ctx); err != nil {
		// libvirt refusing kvm outright is a "no", not a harness failure.
		return false, nil
	}
	for {
		s, err := g.State(ctx)
		if err == nil && s == "shut off" {
			log, _ := os.ReadFile(g.SerialLog)
			return strings.Contains(string(log), "Unable to mount root fs") ||
				strings.Contains(string(log), "Kernel panic"), nil
		}
		if err == nil && (s == "paused" || s == "crashed") {
			slog.Info("KVM probe: domain "+s+"; using TCG", "domain", g.Name)
			return false, nil
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(g.SerialLog)
			slog.Info("KVM probe: no clean stop within the bound; using TCG", "domain", g.Name, "state", s, "serial_tail", tail(string(log), 3))
			return false, nil
		case <-time.After(time.Second):
		}
	}
}
