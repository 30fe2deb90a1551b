package kinds

import "github.com/vmpayload/vmpayload/payload/job"

// A Checker is a kind's own checks of a job: of a job of its kind, its
// fields; of any other job, the refusal of the fields only it takes. The
// kind's package registers them (RegisterCheck) under its name in the
// field table.
type Checker interface {
	Check(j *job.Job, r *job.Report)
}

// A Defaulter is a kind with defaults of its own, filled in before the
// job's shared ones (media "iso", user_data_mode "merge").
type Defaulter interface {
	Defaults(j *job.Job)
}

var checks = map[string]Checker{}

// RegisterCheck makes c the checks of the field table's kind name
// (Ignition, Windows, Sysprep); job.Validate runs them in that order.
func RegisterCheck(name string, c Checker) { checks[name] = c }

func init() { job.SetKinds(hooks{}) }

// hooks answers package job (job.Kinds).
type hooks struct{}

func linked() {
	if len(registry) == 0 {
		panic("kinds: no kind is registered; import payload/kinds/register")
	}
}

func (hooks) Check(j *job.Job, name string, r *job.Report) {
	c := checks[name]
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
	if d, ok := Of(j.Format).(Defaulter); ok {
		d.Defaults(j)
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
