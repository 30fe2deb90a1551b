// Package engine runs one job against libvirt: it renders and writes the
// payload image, puts the payload drive into the domain (inactive XML for a
// stopped domain, a media change or SCSI hot-plug for a running one), starts
// the domain when asked, records the image's recipe in the domain's
// persistent definition, and removes images that are no longer referenced.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"libvirt.org/go/libvirt"
)

// Engine runs jobs. Its fields are set once before use.
type Engine struct {
	Host          libvirtx.Host
	PayloadDir    string
	SecretsDir    string
	DefaultFormat job.Format
	Bus           domxml.Bus
	ImageMode     os.FileMode
	ImageGID      int // -1 keeps the agent's group
	Log           *slog.Logger
	// Metrics records timings and counts; nil records nothing.
	Metrics *metrics.Agent
	// RetryBackoff bounds the wait between attempts while libvirt is
	// unreachable (default 200ms doubling to 5s).
	RetryBackoff time.Duration
	// TrayWait bounds how long a live media change is retried while the
	// guest holds the drive's tray shut (default 30s); when under 3s it
	// also bounds the wait for libvirt to record the tray shut after a
	// change (settleTray).
	TrayWait time.Duration
	// ResetWindow: a domain started less than this long ago whose IDE/SATA
	// payload drive is left out of step by a media change is reset to repair
	// it (default 60s; see changeMedia).
	ResetWindow time.Duration
	// Starts records when domains started; shared by the agent's engines.
	Starts *Starts
	// Cleanups holds image removals that failed, for RetryCleanups; shared
	// by the agent's engines.
	Cleanups *Cleanups
	// Locks serialise the jobs of one domain by its UUID; shared by the
	// agent's engines. nil: the engine's own.
	Locks     *DomainLocks
	locksOnce sync.Once
	// LibvirtTimeout bounds how long a job waits for an unreachable
	// libvirt (retrying) before it fails with libvirt_timeout; 0 waits
	// until the job's context ends. (Each call's own deadline is the
	// host's: libvirtx.Bounded.)
	LibvirtTimeout time.Duration
	// PrebuiltDirs are the directories a job's prebuilt_image may come
	// from (config prebuilt_dirs); none disables prebuilt_image. The image
	// is copied into PayloadDir before it is checked and attached.
	PrebuiltDirs []string
	// GuestReport is the default of a job's guest_report (config
	// guest_report): the payload carries the guest reporter and the domain
	// gets the report channel (docs/guest-report.md).
	GuestReport bool
	// HostID is this host's id (owner.HostID). Images the engine builds
	// or reuses are claimed for it, and it removes only images whose owner
	// marker names it or that have none, so that hosts sharing a payload
	// directory never remove each other's images (package payload/owner).
	// "" records no owner and removes as before markers existed.
	HostID string
}

func (e *Engine) log() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}

// failure is an error with the result code it maps to.
type failure struct {
	code, field string
	err         error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func fail(code string, format string, args ...any) error {
	return &failure{code: code, err: fmt.Errorf(format, args...)}
}

func (e *Engine) locks() *DomainLocks {
	e.locksOnce.Do(func() {
		if e.Locks == nil {
			e.Locks = &DomainLocks{}
		}
	})
	return e.Locks
}

// CheckOptions are the options payload.Check needs for a job this engine
// runs: its defaults (format, guest report) and secrets directory. The API
// and the spool intake check jobs with them, so a job they accept is not
// refused here for its content.
func (e *Engine) CheckOptions() payload.CheckOptions {
	return payload.CheckOptions{Defaults: e.defaults(), Secrets: true, SecretsDir: e.SecretsDir, Agent: true}
}

// defaults are the engine's job defaults (job.Job.Apply).
func (e *Engine) defaults() job.Defaults {
	report := e.GuestReport
	return job.Defaults{Format: e.DefaultFormat, GuestReport: &report}
}

// Run executes j and returns its final result (state done or failed). The
// result's ID, Source and ReceivedAt are taken from base. While libvirt is
// unreachable the job is retried, for at most LibvirtTimeout (when set; the
// job then fails with libvirt_timeout), or until ctx ends: it then returns
// ctx's error and no result, so the caller can leave the job to be run
// again.
func (e *Engine) Run(ctx context.Context, j *job.Job, base result.Result) (result.Result, error) {
	jj := j.Apply(e.defaults())
	// An Ignition job that names no delivery gets the one the domain's
	// architecture reads (ignitionDelivery), decided once the domain is
	// known.
	defaultDelivery := jj.Format == job.FormatIgnition && j.IgnitionDelivery == ""
	// a sysprep job that names no medium gets the one the domain's
	// machine can take (sysprepMedium); Apply filled in the floppy
	autoMedium := j.SysprepMedium == "" && j.Media == ""
	backoff := e.RetryBackoff
	if backoff <= 0 {
		backoff = 200 * time.Millisecond
	}
	stateRetries := 0
	var downSince time.Time // first attempt that found libvirt unreachable
	for attempt := 1; ; attempt++ {
		r := base
		r.Domain, r.Action, r.Attempts = jj.Domain, string(jj.Action), attempt
		err := e.run(ctx, &jj, defaultDelivery, autoMedium, &r)
		if err == nil {
			r.State = result.StateDone
			return r, nil
		}
		if libvirtx.IsDisconnected(err) && ctx.Err() == nil {
			if downSince.IsZero() {
				downSince = time.Now()
			}
			if e.LibvirtTimeout > 0 && time.Since(downSince) >= e.LibvirtTimeout {
				r.Fail(result.CodeLibvirtTimeout, fmt.Sprintf("libvirt stayed unreachable for %s (libvirt_timeout) over %d attempts: %v",
					time.Since(downSince).Round(time.Millisecond), attempt, err), "")
				return r, nil
			}
			e.Metrics.Retry()
			e.log().Warn("libvirt unreachable; retrying job", "job", r.ID, "domain", jj.Domain, "attempt", attempt, "err", err)
			select {
			case <-ctx.Done():
				return result.Result{}, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		if ctx.Err() != nil {
			return result.Result{}, ctx.Err()
		}
		if (stateChanged(err) || e.stoppedUnder(ctx, &jj, err)) && stateRetries < maxStateRetries {
			stateRetries++
			// The domain changed state between the lookup and the change
			// (e.g. a restarted libvirtd killed a half-started guest): look
			// it up again and redo the job for its new state.
			e.log().Warn("domain changed state during the job; retrying", "job", r.ID, "domain", jj.Domain, "attempt", attempt, "err", err)
			continue
		}
		var ve *job.ValidationError
		var f *failure
		var te *libvirtx.TimeoutError
		switch {
		case errors.As(err, &te):
			// Before the other cases: a timeout inside a define is a
			// timeout, not libvirt refusing domain_xml.
			r.Fail(result.CodeLibvirtTimeout, err.Error(), "")
		case errors.As(err, &ve):
			r.Fail(result.CodeInvalidJob, ve.Error(), ve.Errors[0].Field)
			r.Errors = ve.Errors
		case errors.As(err, &f):
			r.Fail(f.code, err.Error(), f.field)
		case libvirtx.IsUnsupported(err):
			r.Fail(result.CodeUnsupported, err.Error(), "")
		case isIO(err):
			r.Fail(result.CodeIO, err.Error(), "")
		default:
			r.Fail(result.CodeLibvirt, err.Error(), "")
		}
		return r, nil
	}
}

// maxStateRetries bounds how often a job is redone because the domain
// changed state under it.
const maxStateRetries = 3

// stateChanged reports whether err is libvirt's "operation invalid" (domain
// not running, already running), which means the domain's state changed
// since the job looked it up.
func stateChanged(err error) bool {
	var le libvirt.Error
	return errors.As(err, &le) && le.Code == libvirt.ERR_OPERATION_INVALID
}

// stoppedUnder reports whether err is a domain_running failure of a domain
// that no longer runs: it was destroyed or shut down after the job looked it
// up, so the job is redone for the stopped domain instead of failing.
func (e *Engine) stoppedUnder(ctx context.Context, j *job.Job, err error) bool {
	var f *failure
	if !errors.As(err, &f) || f.code != result.CodeDomainRunning {
		return false
	}
	d, lerr := e.Host.Domain(ctx, j.Domain)
	return lerr == nil && !d.Active
}

func isIO(err error) bool {
	var pe *os.PathError
	var le *os.LinkError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, spool.ErrNotDir)
}

func (e *Engine) run(ctx context.Context, j *job.Job, defaultDelivery, autoMedium bool, r *result.Result) (err error) {
	if j.Format == job.FormatSysprep && j.Action != job.ActionDetach && j.PrebuiltImage == "" {
		// before the check and anything it or the attach changes
		m, merr := e.sysprepMedium(ctx, j, autoMedium)
		if merr != nil {
			return merr
		}
		if m != j.SysprepMedium {
			jc := *j
			jc.SysprepMedium, jc.Media = m, ""
			jc = jc.Apply(e.defaults())
			j = &jc
		}
	}
	checked, rep := payload.CheckJob(j, e.CheckOptions())
	if !rep.OK() {
		return rep.Err()
	}
	var rendered *payload.Rendered
	if checked != nil { // nil for a detach or a prebuilt image
		var err error
		if rendered, err = payload.Render(checked, payload.Options{}); err != nil {
			return err
		}
	}
	dom, err := e.Host.Domain(ctx, j.Domain)
	if libvirtx.IsNotFound(err) && j.DomainXML != "" && j.Action != job.ActionDetach {
		if dom, err = e.Host.DefineXML(ctx, j.DomainXML); err != nil {
			if libvirtx.IsDisconnected(err) {
				return err
			}
			return &failure{code: result.CodeDefineFailed, field: "domain_xml", err: fmt.Errorf("defining the domain from domain_xml: %w", err)}
		}
		e.log().Info("defined domain from job", "domain", dom.Name, "uuid", dom.UUID)
	}
	if libvirtx.IsNotFound(err) {
		return &failure{code: result.CodeDomainNotFound, field: "domain", err: fmt.Errorf("domain %q does not exist on this host (give domain_xml to define it)", j.Domain)}
	}
	if err != nil {
		return fmt.Errorf("looking up domain %q: %w", j.Domain, err)
	}
	// One job at a time changes a domain, however each names it.
	unlock, waited, err := e.locks().Lock(ctx, dom.UUID)
	if err != nil {
		return err
	}
	defer unlock()
	if waited {
		// another job changed the domain meanwhile: read it again
		if dom, err = e.Host.Domain(ctx, dom.UUID); err != nil {
			if libvirtx.IsNotFound(err) {
				return &failure{code: result.CodeDomainNotFound, field: "domain", err: fmt.Errorf("domain %q does not exist on this host (give domain_xml to define it)", j.Domain)}
			}
			return fmt.Errorf("looking up domain %q: %w", j.Domain, err)
		}
	}
	r.DomainUUID = dom.UUID
	r.Domain = dom.Name

	if j.Action == job.ActionDetach {
		return e.detach(ctx, dom, r)
	}
	if rendered != nil && rendered.Job.Format == job.FormatIgnition {
		if rendered, err = e.ignitionDelivery(dom, j, rendered, defaultDelivery); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				e.firstBootNotice(ctx, dom, r)
			}
		}()
	}
	if rendered != nil && rendered.Delivery() == kinds.DeliveryFwCfg {
		return e.attachFwCfg(ctx, dom, rendered, j.Action == job.ActionStart, r)
	}
	// An Ignition config an earlier job delivered by fw_cfg gives way to
	// the image (one payload per domain): its entries leave the definition
	// with the attach's edit, its file goes once the job succeeded.
	oldFwCfg := e.ownedFwCfgFiles(dom.InactiveXML)

	// The payload image, and its recipe (none for a prebuilt image: any old
	// recipe is removed, the drive no longer holds an image vmpayload built).
	var imgPath, recipeEl string
	t0 := time.Now()
	if j.PrebuiltImage != "" {
		p, info, err := e.copyPrebuilt(j.PrebuiltImage, dom.UUID)
		if err != nil {
			return err
		}
		imgPath, r.Payload = p, info
	} else {
		imgPath = filepath.Join(e.PayloadDir, rendered.ImageName(dom.UUID))
		res, reused, err := e.writeImage(ctx, rendered, imgPath)
		if err != nil {
			return err
		}
		r.Payload = &result.Payload{Image: res.Image, Reused: reused}
		e.Metrics.BuildDone(time.Since(t0))
		rc, err := recipe.New(rendered, res)
		if err != nil && reused {
			// A reused image was built by an earlier render (a generated
			// random_seed differs between renders): the domain's recipe for
			// that very image is how it was built.
			if cur, ok, perr := recipe.FromDomainXML(dom.InactiveXML); perr == nil && ok && cur.Path == res.Path && cur.SHA256 == res.SHA256 {
				rc, err = cur, nil
			}
		}
		if err == nil {
			var keys *seal.Keyring
			if keys, err = e.recipeKeys(); err == nil {
				recipeEl, err = rc.Element(keys)
			}
		}
		if err != nil {
			return fmt.Errorf("recording how the payload image of %s was built: %w", dom.Name, err)
		}
	}

	if j.GuestReport != nil && *j.GuestReport {
		r.Guest = &result.Guest{Status: result.GuestPending, Channel: guestreport.Channel, Errors: []string{}, RecoverableErrors: []string{}}
	}
	t1 := time.Now()
	blockdev := rendered != nil && rendered.Delivery() == kinds.DeliveryBlockdev
	old, dev, err := e.attach(ctx, dom, imgPath, recipeEl, j.Action == job.ActionStart, blockdev, r)
	if err != nil {
		if r.Payload != nil && !r.Payload.Reused && !libvirtx.IsDisconnected(err) {
			e.dropUnattached(ctx, dom.UUID, imgPath)
		}
		return err
	}
	e.Metrics.AttachDone(time.Since(t1))
	r.Device = &result.Device{Bus: string(dev.Bus), Target: dev.Target, Kind: string(dev.Kind)}
	if old != "" && old != imgPath && !e.savedUses(ctx, dom, old) {
		e.removeImage(old, metrics.ReasonSuperseded)
	}
	if len(oldFwCfg) > 0 {
		var live liveSet
		if dom.Active {
			live = e.readLive(ctx, dom)
		}
		for _, p := range oldFwCfg {
			e.supersede(dom, live, p, metrics.ReasonSuperseded)
		}
	}
	return nil
}

// savedUses reports whether the shut-off domain's managed save image names
// img: its next start resumes the saved guest with that medium (libvirt
// restores the saved XML, not the persistent one), so a superseded image
// stays until orphan collection finds nothing naming it. When the managed
// save cannot be read the image is kept too (collection judges it later).
func (e *Engine) savedUses(ctx context.Context, dom libvirtx.DomainInfo, img string) bool {
	if dom.Active {
		return false
	}
	saved, err := e.Host.SavedXML(ctx, dom.UUID)
	if err != nil {
		e.log().Warn("reading the managed save image failed; keeping the superseded payload image", "domain", dom.Name, "uuid", dom.UUID, "path", img, "err", err)
		return true
	}
	if saved == "" {
		return false
	}
	files, _ := domxml.ReferencedFiles(saved)
	for _, f := range files {
		if filepath.Clean(f) == filepath.Clean(img) {
			e.log().Info("keeping the superseded payload image: the domain's managed save resumes with it", "domain", dom.Name, "uuid", dom.UUID, "path", img)
			return true
		}
	}
	return false
}

// writeImage writes the rendered image unless an identical one (same content
// hash in its name) is already there and intact.
func (e *Engine) writeImage(ctx context.Context, rd *payload.Rendered, path string) (payload.Result, bool, error) {
	e.Cleanups.cancel(path) // the image is wanted again: never remove it now
	if _, err := os.Lstat(path); err == nil {
		if res, err := rd.Reuse(path); err == nil {
			e.claim(path)
			return res, true, nil
		} else {
			e.log().Warn("existing image is damaged; rebuilding it", "path", path, "err", err)
		}
	}
	if _, err := e.EnsurePayloadDir(); err != nil {
		return payload.Result{}, false, err
	}
	res, err := rd.Write(ctx, path, payload.Options{Mode: e.ImageMode, GID: e.ImageGID})
	if err != nil && errors.Is(err, os.ErrNotExist) {
		// The directory went away during the write: recreate it and
		// write again rather than fail the job for it. Another job or the
		// heal loop may have recreated it already (created is false then):
		// write again all the same.
		if _, derr := e.EnsurePayloadDir(); derr == nil {
			res, err = rd.Write(ctx, path, payload.Options{Mode: e.ImageMode, GID: e.ImageGID})
		}
	}
	if err != nil {
		if errors.Is(err, image.ErrInvalidSpec) || errors.Is(err, image.ErrTooLarge) {
			return res, false, &failure{code: result.CodeInvalidJob, err: err}
		}
		return res, false, err
	}
	e.claim(path)
	return res, false, nil
}

// claim records this host as the owner of an image it built or uses
// (package payload/owner). A failure is logged, not fatal: the image is in
// place, only another host sharing the directory could remove it.
func (e *Engine) claim(path string) {
	if err := owner.Claim(path, e.HostID); err != nil {
		e.log().Warn("recording this host as the payload image's owner failed; another host sharing the payload directory may remove it", "path", path, "err", err)
	}
}

func (e *Engine) domOpts() []domxml.Option {
	if e.ImageGID >= 0 {
		// The image's group lets qemu read it; libvirt must not chown it.
		return []domxml.Option{domxml.WithoutDACRelabel()}
	}
	return nil
}

// attach puts imgPath into the domain's payload drive, records recipeEl (the
// image's recipe element; "" removes any recipe) in the persistent
// definition, and starts the domain when start is set. It returns the image
// the drive held before.
func (e *Engine) attach(ctx context.Context, dom libvirtx.DomainInfo, imgPath, recipeEl string, start, blockdev bool, r *result.Result) (string, domxml.Device, error) {
	// A stopped domain's definition is edited in one session (drive,
	// channel, recipe: one parse, one serialisation); a running domain's
	// changes go through libvirt's device calls.
	var (
		ed    *domxml.Edit
		cur   domxml.PayloadDisk
		found bool
		err   error
	)
	if dom.Active {
		cur, found, err = domxml.FindPayload(dom.InactiveXML)
	} else if ed, err = domxml.NewEdit(dom.InactiveXML); err == nil {
		cur, found, err = ed.FindPayload()
	}
	if err != nil {
		return "", domxml.Device{}, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	old := ""
	if found {
		old = cur.Path
	}
	opts, bus, kind := e.domOpts(), e.Bus, domxml.KindCDROM
	if blockdev {
		// An Ignition config as a block device: a read-only raw virtio
		// disk with serial "ignition", what Ignition's qemu platform
		// reads on s390x and ppc64le (/dev/disk/by-id/virtio-ignition).
		opts, kind, bus = append(opts, domxml.AsDisk(), domxml.WithSerial(domxml.IgnitionSerial)), domxml.KindDisk, domxml.BusVirtio
	} else if r.Payload != nil && r.Payload.Delivery() == kinds.DeliveryFloppy {
		// a sysprep floppy image goes into a floppy drive (fdc)
		opts, kind = append(opts, domxml.AsFloppy()), domxml.KindFloppy
	} else if r.Payload != nil && r.Payload.Media == string(image.MediaVFAT) {
		// vfat payloads are read-only disks (see domxml.KindDisk); the
		// configured CD-ROM bus applies only when disks can use it.
		opts, kind = append(opts, domxml.AsDisk()), domxml.KindDisk
		if bus == domxml.BusIDE || bus == domxml.BusSATA {
			bus = domxml.BusAuto
		}
	}
	if !dom.Active {
		dev, _, err := ed.SetPayloadDrive(imgPath, bus, opts...)
		if err != nil {
			return "", dev, fmt.Errorf("adding the payload drive to %s: %w", dom.Name, err)
		}
		e.dropFwCfg(ed)
		if err = withRecipe(ed, dom.InactiveXML, recipeEl, r.Guest != nil); err != nil {
			return "", dev, fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
		}
		xml, err := ed.XML()
		if err != nil {
			return "", dev, fmt.Errorf("adding the payload drive to %s: %w", dom.Name, err)
		}
		if xml != dom.InactiveXML {
			if err := libvirtx.Redefine(ctx, e.Host, xml); err != nil {
				return "", dev, fmt.Errorf("redefining %s with the payload drive: %w", dom.Name, err)
			}
		}
		r.DomainState = "shut off"
		if start {
			if err := e.start(ctx, dom, xml != dom.InactiveXML); err != nil {
				return "", dev, err
			}
			r.DomainState = "running"
		}
		return old, dev, nil
	}
	r.DomainState = "running"
	if found && cur.Path == imgPath {
		// Same content already in the drive (a re-submitted job): nothing
		// to change but a recipe an older version did not write.
		return old, cur.Device, e.recordRecipe(ctx, dom, recipeEl, r.Guest != nil)
	}
	if kind == domxml.KindFloppy {
		// sysprep reads the answer file while Windows starts: a floppy is
		// set in the definition of a stopped domain only (libvirt cannot
		// hot-plug a floppy drive)
		return "", cur.Device, fail(result.CodeDomainRunning, "domain %s is running; a sysprep floppy is only attached to a stopped domain (a floppy drive cannot be hot-plugged): stop the domain, or use sysprep_medium \"cdrom\"", dom.Name)
	}
	if found && (cur.Kind != domxml.KindCDROM || kind != domxml.KindCDROM) {
		return "", cur.Device, fail(result.CodeDomainRunning, "domain %s is running and its payload drive %s is a %s while the job needs a %s (vfat payloads are disks, ISO payloads CD-ROMs); only a CD-ROM's medium can change while the domain runs: stop the domain, or use media iso", dom.Name, cur.Target, cur.Kind, kind)
	}
	if found {
		dev := cur.Device
		x, err := domxml.PayloadDeviceXML(imgPath, dev, opts...)
		if err != nil {
			return "", dev, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
		}
		if err := e.changeMedia(ctx, dom, cur, x, libvirtx.DOMAIN_DEVICE_MODIFY_CONFIG, false); err != nil {
			return "", dev, fmt.Errorf("changing the payload medium of running domain %s: %w", dom.Name, err)
		}
		return old, dev, e.recordRecipe(ctx, dom, recipeEl, r.Guest != nil)
	}
	live, liveFound, err := e.livePayload(ctx, dom)
	if err != nil {
		return "", domxml.Device{}, err
	}
	if liveFound {
		dev, err := e.reattach(ctx, dom, live, imgPath, recipeEl, kind, opts, r.Guest != nil)
		return live.Path, dev, err
	}
	var dev domxml.Device
	if kind == domxml.KindDisk {
		// A read-only disk hot-plugs on virtio or SCSI.
		if dev, err = domxml.ChooseDevice(dom.InactiveXML, bus, opts...); err != nil {
			return "", dev, fmt.Errorf("choosing the payload disk of running domain %s: %w", dom.Name, err)
		}
	} else {
		dev, err = domxml.ChooseDevice(dom.InactiveXML, domxml.BusSCSI)
		if err != nil || (bus != domxml.BusAuto && bus != domxml.BusSCSI) || !hasSCSI(dom.InactiveXML) {
			return "", dev, fail(result.CodeDomainRunning, "domain %s is running and has no payload drive, and a CD-ROM can only be hot-plugged on a SCSI controller: stop the domain or give it a SCSI controller (virtio-scsi)", dom.Name)
		}
	}
	x, err := domxml.PayloadDeviceXML(imgPath, dev, opts...)
	if err != nil {
		return "", dev, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
	}
	if err := e.Host.AttachDevice(ctx, dom.UUID, x, libvirtx.DOMAIN_DEVICE_MODIFY_LIVE|libvirtx.DOMAIN_DEVICE_MODIFY_CONFIG); err != nil {
		return "", dev, fmt.Errorf("hot-plugging the payload drive into running domain %s: %w", dom.Name, err)
	}
	return "", dev, e.recordRecipe(ctx, dom, recipeEl, r.Guest != nil)
}

// withRecipe edits ed, a session on domainXML, to hold recipeEl as the
// domain's only vmpayload recipe, or no recipe when recipeEl is "", and the
// guest report channel when guest is set (else not): the channel goes with
// the payload. A recipe equal to the one already there is left as it is
// (libvirt may have re-serialised it).
func withRecipe(ed *domxml.Edit, domainXML, recipeEl string, guest bool) error {
	var err error
	if guest {
		_, err = ed.SetGuestChannel(guestreport.Channel)
	} else {
		_, err = ed.RemoveGuestChannel(guestreport.Channel)
	}
	if err != nil {
		return err
	}
	if recipeEl == "" {
		_, err := ed.RemoveMetadata(recipe.Namespace)
		return err
	}
	// Only a document naming the recipe namespace can hold a recipe (as
	// libvirt writes metadata back, the URI is there literally): a domain
	// without one, the usual first job, skips a pass over its XML. The
	// session's edits so far (drive, channel) leave <metadata> alone, so
	// the recipe there is the one domainXML has.
	if strings.Contains(domainXML, recipe.Namespace) {
		if cur, ok, err := recipe.FromDomainXML(domainXML); err == nil && ok {
			// cur renders as it was read (sealed, or in clear if written
			// before sealing, which is then rewritten sealed)
			if el, err := cur.Element(nil); err == nil && el == recipeEl {
				return nil
			}
		}
	}
	return ed.SetMetadata(recipe.Namespace, recipeEl)
}

// recordRecipe writes recipeEl into the persistent definition of a running
// domain after its drive changed (or removes the recipe when recipeEl is
// ""): it reads the persistent XML again (the live change updated it), sets
// the element and redefines the domain, which libvirt allows while it runs.
func (e *Engine) recordRecipe(ctx context.Context, dom libvirtx.DomainInfo, recipeEl string, guest bool) error {
	cur, err := e.Host.Domain(ctx, dom.UUID)
	if err != nil {
		return fmt.Errorf("reading the definition of %s to record the payload recipe: %w", dom.Name, err)
	}
	ed, err := domxml.NewEdit(cur.InactiveXML)
	if err == nil {
		e.dropFwCfg(ed)
		err = withRecipe(ed, cur.InactiveXML, recipeEl, guest)
	}
	var x string
	if err == nil {
		x, err = ed.XML()
	}
	if err != nil {
		return fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
	}
	if x != cur.InactiveXML {
		if err := libvirtx.Redefine(ctx, e.Host, x); err != nil {
			return fmt.Errorf("redefining %s with the payload recipe: %w", dom.Name, err)
		}
	}
	return e.recordLiveRecipe(ctx, dom, recipeEl)
}

// recordLiveRecipe puts recipeEl (or, when "", no recipe) into the running
// domain's live definition too. The redefine above changes only the next
// boot's; a live migration, save or managed save carries the live one to
// where the libvirt hook rebuilds the image, and it must name the image the
// drive holds now, not the one the domain started with (issue 36: after a
// live media change, a migration made the destination's hook rebuild the
// old image). Hosts without LiveMetadataSetter (the fake) skip it.
func (e *Engine) recordLiveRecipe(ctx context.Context, dom libvirtx.DomainInfo, recipeEl string) error {
	s, ok := e.Host.(libvirtx.LiveMetadataSetter)
	if !ok {
		return nil
	}
	if err := s.SetLiveMetadata(ctx, dom.UUID, recipe.MetadataContent(recipeEl), recipe.Prefix, recipe.Namespace); err != nil {
		var le libvirt.Error
		if libvirtx.IsNotFound(err) || errors.As(err, &le) && le.Code == libvirt.ERR_OPERATION_INVALID {
			return nil // stopped meanwhile ("domain is not running"): the persistent definition is what counts
		}
		return fmt.Errorf("recording the payload recipe in the live definition of %s: %w", dom.Name, err)
	}
	return nil
}

// detach removes the payload drive from the domain and deletes its image.
func (e *Engine) detach(ctx context.Context, dom libvirtx.DomainInfo, r *result.Result) error {
	// The definition's edits (drive, recipe, channel) are one session.
	ed, err := domxml.NewEdit(dom.InactiveXML)
	var (
		cur   domxml.PayloadDisk
		found bool
	)
	if err == nil {
		cur, found, err = ed.FindPayload()
	}
	if err != nil {
		return fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	r.DomainState = "shut off"
	if dom.Active {
		r.DomainState = "running"
	}
	// An Ignition config delivered by fw_cfg: its entries leave the
	// definition with the drive's edit, its file after the redefine.
	fw := ed.RemoveFwCfgEntries(e.ownsFwCfg)
	var live liveSet
	if len(fw) > 0 && dom.Active {
		live = e.readLive(ctx, dom)
	}
	if !found && dom.Active {
		// A drive only the live definition has still holding a medium (an
		// attach that changed the live drive but could not redefine the
		// domain) is detached like a defined one.
		live, liveFound, err := e.livePayload(ctx, dom)
		if err != nil {
			return err
		}
		if liveFound && live.Path != "" {
			cur, found = live, true
		}
	}
	if !found {
		// Nothing to detach (the outcome the job asks for); a recipe left
		// without its drive goes too.
		removed, err := ed.RemoveMetadata(recipe.Namespace)
		if err != nil {
			return fmt.Errorf("removing the payload recipe from %s: %w", dom.Name, err)
		}
		chRemoved, err := ed.RemoveGuestChannel(guestreport.Channel)
		if err != nil {
			return fmt.Errorf("removing the guest report channel from %s: %w", dom.Name, err)
		}
		if !removed && !chRemoved && len(fw) == 0 {
			return nil
		}
		xml, err := ed.XML()
		if err != nil {
			return fmt.Errorf("removing the payload recipe from %s: %w", dom.Name, err)
		}
		if err := libvirtx.Redefine(ctx, e.Host, xml); err != nil {
			return fmt.Errorf("redefining %s without the payload recipe: %w", dom.Name, err)
		}
		e.fwCfgDetached(dom, fw, live, r)
		return nil
	}
	r.Device = &result.Device{Bus: string(cur.Bus), Target: cur.Target, Kind: string(cur.Kind)}
	if dom.Active && cur.Kind == domxml.KindFloppy {
		return fail(result.CodeDomainRunning, "domain %s is running and its payload drive %s is a floppy, which cannot be unplugged while the domain runs: stop the domain first", dom.Name, cur.Target)
	}
	if dom.Active && (cur.Kind != domxml.KindCDROM || cur.Bus.Hotpluggable()) {
		// A disk (vfat payload) has no medium to eject, and a CD-ROM on
		// SCSI can go as it came: unplug it. (Ejecting fails on a SCSI
		// CD-ROM hot-plugged in this QEMU run: libvirt never learnt it has
		// a tray; see docs/media-change.md.)
		x, err := domxml.PayloadDeviceXML(cur.Path, cur.Device, e.domOpts()...)
		if err != nil {
			return fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
		}
		if err := e.Host.DetachDevice(ctx, dom.UUID, x, libvirtx.DOMAIN_DEVICE_MODIFY_LIVE); err != nil {
			return fmt.Errorf("unplugging the payload drive of running domain %s: %w", dom.Name, err)
		}
	} else if dom.Active {
		// Eject the medium from the live drive (IDE/SATA drives cannot be
		// unplugged while running); the drive leaves the definition below
		// and stays live, empty, until the domain stops. The next attach
		// reuses it (reattach).
		// An eject is a media change to none, with the same recovery of a
		// tray libvirt records out of step (changeMedia).
		x, err := domxml.EjectedDeviceXML(cur.Device)
		if err != nil {
			return fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
		}
		if err := e.changeMedia(ctx, dom, cur, x, 0, true); err != nil {
			return fmt.Errorf("ejecting the payload of running domain %s: %w", dom.Name, err)
		}
	}
	if _, err := ed.RemovePayloadDrive(); err != nil {
		return fmt.Errorf("removing the payload drive from %s: %w", dom.Name, err)
	}
	if _, err := ed.RemoveMetadata(recipe.Namespace); err != nil {
		return fmt.Errorf("removing the payload recipe from %s: %w", dom.Name, err)
	}
	if _, err := ed.RemoveGuestChannel(guestreport.Channel); err != nil {
		return fmt.Errorf("removing the guest report channel from %s: %w", dom.Name, err)
	}
	xml, err := ed.XML()
	if err != nil {
		return fmt.Errorf("removing the payload drive from %s: %w", dom.Name, err)
	}
	if err := libvirtx.Redefine(ctx, e.Host, xml); err != nil {
		return fmt.Errorf("redefining %s without the payload drive: %w", dom.Name, err)
	}
	if dom.Active {
		if err := e.recordLiveRecipe(ctx, dom, ""); err != nil {
			return err
		}
	}
	if cur.Path != "" {
		e.removeImage(cur.Path, metrics.ReasonDetach)
	}
	e.fwCfgDetached(dom, fw, live, r)
	return nil
}

// fwCfgDetached finishes a detach that removed the fw_cfg entries fw from
// dom's definition: their files go (or, when the running domain's QEMU was
// started with them, when it stops: see supersede), and when the guest has
// them the result says it keeps its copy until its next cold start.
func (e *Engine) fwCfgDetached(dom libvirtx.DomainInfo, fw []domxml.FwCfgEntry, live liveSet, r *result.Result) {
	for _, en := range fw {
		e.supersede(dom, live, en.File, metrics.ReasonDetach)
	}
	if len(fw) > 0 && dom.Active && e.hasOwnedIgnition(live) {
		r.TakesEffect, r.Notice = result.TakesEffectNextColdStart, NoticeFwCfgDetachRunning
	}
}
