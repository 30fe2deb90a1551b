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
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/smbios"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
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
	// change (the drive delivery's settleTray).
	TrayWait time.Duration
	// ResetWindow: a domain started less than this long ago whose IDE/SATA
	// payload drive is left out of step by a media change is reset to repair
	// it (default 60s; see the drive delivery's changeMedia).
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

// failure is an error with the result code (and job field) it maps to;
// the deliveries return them too.
type failure = delivery.Failure

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
	defaultDelivery := kinds.Chooses(jj.Format) == kinds.ChooseDelivery && j.IgnitionDelivery == ""
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
			r.Fail(f.Code, err.Error(), f.Field)
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
	if !errors.As(err, &f) || f.Code != result.CodeDomainRunning {
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
	if kinds.Chooses(j.Format) == kinds.ChooseMedium && j.Action != job.ActionDetach && j.PrebuiltImage == "" {
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
			return &failure{Code: result.CodeDefineFailed, Field: "domain_xml", Err: fmt.Errorf("defining the domain from domain_xml: %w", err)}
		}
		e.log().Info("defined domain from job", "domain", dom.Name, "uuid", dom.UUID)
	}
	if libvirtx.IsNotFound(err) {
		return &failure{Code: result.CodeDomainNotFound, Field: "domain", Err: fmt.Errorf("domain %q does not exist on this host (give domain_xml to define it)", j.Domain)}
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
				return &failure{Code: result.CodeDomainNotFound, Field: "domain", Err: fmt.Errorf("domain %q does not exist on this host (give domain_xml to define it)", j.Domain)}
			}
			return fmt.Errorf("looking up domain %q: %w", j.Domain, err)
		}
	}
	r.DomainUUID = dom.UUID
	r.Domain = dom.Name

	if j.Action == job.ActionDetach {
		return e.detach(ctx, dom, r)
	}
	seen := false // the running guest has this payload already
	if rendered != nil && kinds.Chooses(rendered.Job.Format) == kinds.ChooseDelivery {
		if rendered, err = e.ignitionDelivery(dom, j, rendered, defaultDelivery); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				e.firstBootNotice(ctx, dom, seen, r)
			}
		}()
	}
	seen, err = e.attach(ctx, dom, j, rendered, r)
	return err
}

// attach builds the payload's files (or copies a prebuilt image) and its
// recipe, and gives them to the domain through the job's delivery
// (deliveryName), which takes the other deliveries' payloads out of the
// definition: a domain has one payload. Once that succeeded, the files no
// definition names any more go (see supersede). It reports whether the
// running guest has this payload already (delivery.Attached.Seen).
func (e *Engine) attach(ctx context.Context, dom libvirtx.DomainInfo, j *job.Job, rendered *payload.Rendered, r *result.Result) (bool, error) {
	ds := e.deliveries()
	rt := routeOf(rendered)
	d, err := ds.Get(rt.delivery)
	if err != nil {
		return false, err
	}
	// The other deliveries' payloads leave the definition with the
	// attach's edit, their files once the job succeeded.
	others := ds.Others(rt.delivery)
	var prev []string
	for _, o := range others {
		prev = append(prev, o.Files(dom.InactiveXML)...)
	}
	p := &delivery.Payload{Start: j.Action == job.ActionStart, DropOthers: func(ed *domxml.Edit) error {
		for _, o := range others {
			if err := o.Drop(ed, dom); err != nil {
				return err
			}
		}
		return nil
	}}

	// The payload's files, and its recipe (none for a prebuilt image: any
	// old recipe is removed, the drive no longer holds an image vmpayload
	// built).
	t0 := time.Now()
	var parts []string // the part files this job wrote (named values)
	if rendered != nil && rendered.Shape() != payload.ShapeImage {
		var err error
		if parts, err = e.writeValues(ctx, dom, rendered, p, r); err != nil {
			return false, err
		}
		e.Metrics.BuildDone(time.Since(t0))
	} else if j.PrebuiltImage != "" {
		path, info, err := e.copyPrebuilt(j.PrebuiltImage, dom.UUID)
		if err != nil {
			return false, err
		}
		p.Path, r.Payload = path, info
	} else {
		p.Path = filepath.Join(e.PayloadDir, rendered.ImageName(dom.UUID))
		res, reused, err := e.writeImage(ctx, rendered, p.Path)
		if err != nil {
			return false, err
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
			p.Recipe, err = e.sealRecipe(rc)
		}
		if err != nil {
			return false, fmt.Errorf("recording how the %s of %s was built: %w", rt.noun, dom.Name, err)
		}
	}
	for _, n := range rt.names {
		p.Named = append(p.Named, delivery.Named{Name: n, File: p.Path})
	}
	p.Drive = driveOf(rendered, r.Payload)

	if j.GuestReport != nil && *j.GuestReport {
		r.Guest = &result.Guest{Status: result.GuestPending, Channel: guestreport.Channel, Errors: []string{}, RecoverableErrors: []string{}}
	}
	p.Guest = r.Guest != nil
	t1 := time.Now()
	out, err := d.Attach(ctx, dom, p, r)
	if err != nil {
		if r.Payload != nil && !r.Payload.Reused && !libvirtx.IsDisconnected(err) {
			e.dropUnattached(ctx, dom.UUID, p.Path)
		}
		if !libvirtx.IsDisconnected(err) {
			for _, f := range parts {
				e.dropUnattached(ctx, dom.UUID, f)
			}
		}
		return false, err
	}
	e.Metrics.AttachDone(time.Since(t1))
	if len(p.Named) > 0 && r.Credentials != nil && r.TakesEffect != "" && smbios.FirstBootOnly(r.Credentials) {
		// credentials by fw_cfg for a running domain: the first-boot ones
		// apply only if that cold start is the guest's first boot
		r.Notice += "; " + smbios.NoticeFirstBootOnly
	}
	for _, f := range out.Remove {
		if !e.savedUses(ctx, dom, f) {
			e.removeImage(f, metrics.ReasonSuperseded)
		}
	}
	live := out.Live
	for _, f := range append(out.Supersede, prev...) {
		if f == p.Path || slices.ContainsFunc(p.Named, func(n delivery.Named) bool { return n.File == f }) {
			continue
		}
		if live == nil && dom.Active {
			live = e.env().ReadLive(ctx, dom)
		}
		e.supersede(dom, live, f, metrics.ReasonSuperseded)
	}
	return out.Seen, nil
}

// writeValues writes the files of a payload of named values (one per part,
// Rendered.Parts: fw_cfg credentials) that are not in place already, each
// claimed for this host, and puts them into p under their names, or, for a
// payload without files, its values (Rendered.Inline); then the recipe,
// which lists the values (and files) so that start-up and the hook
// rebuild each file and the delivery knows its own entries. It returns
// the files it wrote (an attach that fails removes them). No value is
// logged or put into the result: the result lists the names.
func (e *Engine) writeValues(ctx context.Context, dom libvirtx.DomainInfo, rd *payload.Rendered, p *delivery.Payload, r *result.Result) ([]string, error) {
	var written []string
	fail := func(err error) ([]string, error) {
		for _, f := range written {
			e.removeImage(f, metrics.ReasonUnattached)
		}
		return nil, err
	}
	paths := map[string]string{}
	for _, part := range rd.Parts() {
		path := filepath.Join(e.PayloadDir, rd.PartName(dom.UUID, part.Key))
		e.Cleanups.cancel(path) // wanted again: never remove it now
		if !payload.PartIntact(path, part.Data) {
			if _, err := e.EnsurePayloadDir(); err != nil {
				return fail(err)
			}
			if err := payload.WritePart(ctx, path, part.Data, payload.Options{GID: e.ImageGID}); err != nil {
				return fail(err)
			}
			written = append(written, path)
		}
		e.claim(path)
		paths[part.Key] = path
		p.Named = append(p.Named, delivery.Named{Name: part.Name, File: path})
	}
	p.Values = rd.Inline()
	if len(paths) == 0 {
		paths = nil
	}
	rc, err := recipe.NewValues(rd, paths)
	if err == nil {
		p.Recipe, err = e.sealRecipe(rc)
	}
	if err != nil {
		return fail(fmt.Errorf("recording how the credentials of %s were made: %w", dom.Name, err))
	}
	r.Credentials = rd.Names()
	return written, nil
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
	if doc, err := domxml.Read(saved); err == nil && slices.ContainsFunc(doc.ReferencedFiles(), func(f string) bool { return filepath.Clean(f) == filepath.Clean(img) }) {
		e.log().Info("keeping the superseded payload image: the domain's managed save resumes with it", "domain", dom.Name, "uuid", dom.UUID, "path", img)
		return true
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
			return res, false, &failure{Code: result.CodeInvalidJob, Err: err}
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

// detach takes the payload out of the domain, through every delivery (a
// domain has one payload, but which one is read from its definition),
// with the recipe and the guest report channel, in one edit of the
// definition; then the payload's files go.
func (e *Engine) detach(ctx context.Context, dom libvirtx.DomainInfo, r *result.Result) error {
	ed, err := domxml.NewEdit(dom.InactiveXML)
	if err != nil {
		return fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	r.DomainState = "shut off"
	if dom.Active {
		r.DomainState = "running"
	}
	var (
		done           []delivery.Detached
		changed, drive bool
	)
	for _, d := range e.deliveries().All() {
		dt, err := d.Detach(ctx, dom, ed, r)
		if err != nil {
			return err
		}
		done = append(done, dt)
		changed, drive = changed || dt.Changed, drive || dt.Drive
	}
	// What the messages say left the definition.
	what := "payload recipe"
	if drive {
		what = "payload drive"
	}
	// A recipe (and channel) left without its payload goes too.
	removed, err := ed.RemoveMetadata(recipe.Namespace)
	if err != nil {
		return fmt.Errorf("removing the payload recipe from %s: %w", dom.Name, err)
	}
	chRemoved, err := ed.RemoveGuestChannel(guestreport.Channel)
	if err != nil {
		return fmt.Errorf("removing the guest report channel from %s: %w", dom.Name, err)
	}
	if !changed && !removed && !chRemoved {
		return nil // nothing to detach: the outcome the job asks for
	}
	xml, err := ed.XML()
	if err != nil {
		return fmt.Errorf("removing the %s from %s: %w", what, dom.Name, err)
	}
	if err := libvirtx.Redefine(ctx, e.Host, xml); err != nil {
		return fmt.Errorf("redefining %s without the %s: %w", dom.Name, what, err)
	}
	if drive && dom.Active {
		if err := delivery.RecordLiveRecipe(ctx, e.Host, dom, ""); err != nil {
			return err
		}
	}
	for _, dt := range done {
		for _, f := range dt.Remove {
			e.removeImage(f, metrics.ReasonDetach)
		}
		for _, f := range dt.Supersede {
			e.supersede(dom, dt.Live, f, metrics.ReasonDetach)
		}
		if dt.Notice != "" {
			r.TakesEffect, r.Notice = dt.TakesEffect, dt.Notice
		}
	}
	return nil
}
