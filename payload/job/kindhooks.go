package job

// Kinds is what package job asks of the payload kinds instead of comparing
// a job's format or guest OS; package payload/kinds answers (SetKinds).
type Kinds interface {
	// Check runs the own checks of the kind name of the field table
	// ("ignition", "windows", "sysprep", "credentials") on j: of a job of that kind, its
	// fields; of any other job, the refusal of the fields only it takes.
	Check(j *Job, name string, r *Report)
	// Defaults fills in the defaults of j's kind (withDefaults).
	Defaults(j *Job)
	// Traits describes j's kind.
	Traits(j *Job) Traits
	// Takes reports whether every kind j is of takes field (the field
	// table).
	Takes(j *Job, field string) bool
}

// Traits is what a job's kind means for the checks and renderers shared
// by the kinds of cloud-init.
type Traits struct {
	// Known: a kind serves the job's format ("" is the agent's default).
	Known bool
	// OpenStack: the image is OpenStack's config drive (meta_data.json
	// with its own spellings, network_data.json, a base64 random_seed in
	// meta_data.json, no cloud-init network-config).
	OpenStack bool
	// NoCloud: the image is a NoCloud seed (meta-data YAML, no
	// network_data.json, the random seed in the cloud-config).
	NoCloud bool
	// AnswerFile: the payload is one answer file, not cloud-init
	// user-data; the kind checks and renders it alone.
	AnswerFile bool
	// Cloudbase: cloudbase-init reads the job's user-data, meta-data and
	// network settings (a Windows guest of a cloud-init image).
	Cloudbase bool
	// Windows: the guest runs Windows (guest_os "windows").
	Windows bool
	// GlobalDNS: the guest applies dns to every link (systemd-resolved's
	// network.dns), so dns needs no nics.
	GlobalDNS bool
}

var kindHooks Kinds

func hooks() Kinds {
	if kindHooks == nil {
		panic("job: package payload/kinds is not linked in")
	}
	return kindHooks
}

// KindTraits returns the traits of j's kind.
func KindTraits(j *Job) Traits { return hooks().Traits(j) }

// SetKinds installs the kinds' answers; package payload/kinds calls it
// from its init.
func SetKinds(k Kinds) { kindHooks = k }
