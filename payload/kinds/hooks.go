package kinds

import "github.com/vmpayload/vmpayload/payload/job"

// A Checker is checks that are no format's: those of guest_os "windows"
// (package cloudbase), a guest of the cloud-init kinds' images that has
// fields and refusals of its own but no format, so no Kind.
type Checker interface {
	Check(j *job.Job, r *job.Report)
}

var checks = map[string]Checker{}

// RegisterCheck makes c the checks of the field table's name (Windows)
// that no kind serves as its format.
func RegisterCheck(name string, c Checker) { checks[name] = c }

func init() { job.SetKinds(hooks{}) }

// hooks answers package job (job.Kinds).
type hooks struct{}

func linked() {
	if len(registry) == 0 {
		panic("kinds: no kind is registered; import payload/kinds/register")
	}
}

// Check runs the checks of name: the kind whose format it is (Ignition,
// Sysprep, Credentials), which of a job of another format refuses the
// fields only it takes, or those registered under it (Windows).
func (hooks) Check(j *job.Job, name string, r *job.Report) {
	var c Checker = checks[name]
	if k := Of(job.Format(name)); k != nil && name != "" {
		if j.Format != k.Format() {
			Refuse(j, name, false, r)
			return
		}
		c = k
	}
	if c == nil {
		panic("kinds: the checks of kind " + name + " are not linked in; import payload/kinds/register")
	}
	c.Check(j, r)
}

// Defaults gives a job without a format the default kind's (nocloud),
// then the kind's own defaults.
func (hooks) Defaults(j *job.Job) {
	linked()
	if j.Format == "" {
		j.Format = job.FormatNoCloud
	}
	if k := Of(j.Format); k != nil {
		k.Defaults(j)
	}
}

func (hooks) Traits(j *job.Job) job.Traits {
	linked()
	f := j.Format
	return job.Traits{
		Known:      Of(f) != nil,
		OpenStack:  f == job.FormatConfigDrive,
		NoCloud:    f == job.FormatNoCloud,
		AnswerFile: f == job.FormatSysprep,
		Cloudbase:  f == "" || f == job.FormatNoCloud || f == job.FormatConfigDrive,
		Windows:    j.GuestOS == job.GuestWindows,
		GlobalDNS:  f == job.FormatCredentials,
	}
}
