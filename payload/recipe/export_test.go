package recipe

// SealedKey returns the id of the key r's job is sealed with ("" when r
// was not read sealed).
func (r *Recipe) SealedKey() string { return r.sealedKey }
