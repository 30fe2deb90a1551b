package job

// FieldTable is the one table of which payload kind takes which job
// field (package payload/kinds, which installs it: SetFieldTable).
type FieldTable interface {
	// Refuse adds to r a problem for each field of j that kind
	// ("ignition", "windows", "sysprep", "credentials") cannot carry, and, when of is
	// false (j is not of that kind), for each field only that kind takes.
	Refuse(j *Job, kind string, of bool, r *Report)
	// Takes reports whether every kind j is of takes field.
	Takes(j *Job, field string) bool
}

var fields FieldTable

// table returns the field table, which package payload/kinds installs.
func table() FieldTable {
	if fields == nil {
		panic("job: package payload/kinds is not linked in")
	}
	return fields
}

// SetFieldTable installs the field table; package payload/kinds calls it
// from its init.
func SetFieldTable(t FieldTable) { fields = t }
