package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// BenchmarkBootToReport measures virsh start -> report on the serial console
// for a minimal NoCloud seed (hostname only), TCG, 2 vCPUs, 1 GiB. Gated like
// TestBootE2E; VMPAYLOAD_BENCH_SUITE picks the suite (default bookworm).
// Run with -benchtime=1x: each iteration is a full guest boot.
func BenchmarkBootToReport(b *testing.B) {
	testenv.NeedE2E(b, "boot real guests")
	suite := os.Getenv("VMPAYLOAD_BENCH_SUITE")
	if suite == "" {
		suite = Bookworm
	}
	ctx := context.Background()
	if _, err := FixKVMDevice(); err != nil {
		b.Logf("%v", err)
	}
	img, err := EnsureImage(ctx, suite, nil)
	if err != nil {
		b.Fatal(err)
	}
	accel, _ := Accel(ctx, img)
	dir := b.TempDir()
	iso := filepath.Join(dir, "seed.iso")
	if err := NoCloudISO(ctx, iso, "#cloud-config\nhostname: vmpx-bench\n", "instance-id: iid-bench\n", ""); err != nil {
		b.Fatal(err)
	}
	var toReport, guestUp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		g, err := Prepare(ctx, img, Options{Name: fmt.Sprintf("%sbench-%d-%d", NamePrefix, os.Getpid(), i), DomainType: accel})
		if err != nil {
			b.Fatal(err)
		}
		x, err := g.XMLWithCDROM(iso, BusIDE)
		if err == nil {
			err = g.Define(ctx, x)
		}
		if err != nil {
			g.Cleanup(ctx)
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		err = g.Start(ctx)
		var rep *Report
		if err == nil {
			rep, err = g.WaitReport(ctx)
		}
		b.StopTimer()
		if err != nil {
			g.Cleanup(ctx)
			b.Fatal(err)
		}
		toReport += time.Since(start)
		guestUp += time.Duration(rep.Meta.UptimeSeconds * float64(time.Second))
		if err := g.Cleanup(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(toReport.Seconds()/float64(b.N), "s-to-report/op")
	b.ReportMetric(guestUp.Seconds()/float64(b.N), "guest-uptime-s/op")
}
