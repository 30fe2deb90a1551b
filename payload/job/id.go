package job

// MaxIDLen is the longest job id.
const MaxIDLen = 128

// idByte reports whether c belongs to the job id alphabet.
func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidID reports whether id is a job id: 1-MaxIDLen characters from
// A-Z a-z 0-9 . _ -, starting with a letter or digit. It is the one
// definition of the alphabet: the job's id field, the ids the spool
// derives from file names and the ids the API looks up all use it. An id
// never holds "/" and never starts with a dot, so "<id>.json" is always a
// plain file name.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen || !idByte(id[0]) || id[0] == '.' || id[0] == '_' || id[0] == '-' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if !idByte(id[i]) {
			return false
		}
	}
	return true
}

// IDFrom derives a valid job id from any string (a spool file's name
// without ".json"): characters outside the alphabet become "_", the result
// is cut to MaxIDLen, and one that does not start with a letter or digit
// gets the prefix "job".
func IDFrom(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !idByte(c) {
			b[i] = '_'
		}
	}
	id := string(b[:min(len(b), MaxIDLen)])
	if !ValidID(id) {
		id = "job" + id
		id = id[:min(len(id), MaxIDLen)]
	}
	return id
}
