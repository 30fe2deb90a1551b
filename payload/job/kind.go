package job

// refuse adds to r a problem for each field of j that kind ("ignition",
// "windows", "sysprep") cannot carry, and, when of is false (j is not of
// that kind), for each field only that kind takes. It is the one field
// table's (package payload/kinds, which sets it: kinds.Refuse).
var refuse = func(*Job, string, bool, *Report) {
	panic("job: validating a job needs package payload/kinds linked in")
}

// SetRefuse installs the field table's refusals; package payload/kinds
// calls it from its init.
func SetRefuse(f func(j *Job, kind string, of bool, r *Report)) { refuse = f }
