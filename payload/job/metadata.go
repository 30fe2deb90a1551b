package job

import (
	"fmt"
	"maps"
	"reflect"
)

// metaAliases pairs the meta-data keys NoCloud reads (meta-data) with the
// ones config-drive v2 reads (meta_data.json) for the same thing.
var metaAliases = []struct{ nocloud, configdrive string }{
	{"instance-id", "uuid"},
	{"local-hostname", "hostname"},
	{"public-keys", "public_keys"},
}

// MetaDataFor returns the job's meta_data as format f's reader wants it:
// a key spelled the other format's way (instance-id on config-2, uuid on
// NoCloud, ...) is also written under the name this format reads, so it is
// never dropped silently. NoCloud's "hostname" counts as a spelling of
// local-hostname. The given keys stay as they are. Conflicting spellings
// are reported by Validate (checkMetaDataSpellings).
func MetaDataFor(f Format, md map[string]any) map[string]any {
	if md == nil {
		return nil
	}
	out := maps.Clone(md)
	for _, a := range metaAliases {
		target, other := a.nocloud, a.configdrive
		if KindTraits(&Job{Format: f}).OpenStack {
			target, other = a.configdrive, a.nocloud
		}
		if _, ok := md[target]; ok {
			continue
		}
		if v, ok := md[other]; ok {
			out[target] = v
		}
	}
	return out
}

// checkMetaDataSpellings refuses meta_data that gives one thing under both
// spellings with different values: which one the guest gets would depend
// on the format.
func checkMetaDataSpellings(md map[string]any, r *Report) {
	for _, a := range metaAliases {
		v1, ok1 := md[a.nocloud]
		v2, ok2 := md[a.configdrive]
		if ok1 && ok2 && !reflect.DeepEqual(v1, v2) && a.nocloud != "local-hostname" {
			r.Add(join("meta_data", a.configdrive), CodeConflict, "meta_data gives %s and %s with different values (%s, %s); they are the same setting spelled for NoCloud and config-drive, give one",
				a.nocloud, a.configdrive, Quote(fmt.Sprint(v1)), Quote(fmt.Sprint(v2)))
		}
	}
	// NoCloud reads local-hostname; config-drive reads hostname, and on
	// NoCloud hostname is no setting of its own, so they must agree.
	if v1, ok := md["local-hostname"]; ok {
		if v2, ok := md["hostname"]; ok && !reflect.DeepEqual(v1, v2) {
			r.Add("meta_data.hostname", CodeConflict, "meta_data gives local-hostname and hostname with different values (%s, %s); NoCloud reads local-hostname and config-drive hostname, give one",
				Quote(fmt.Sprint(v1)), Quote(fmt.Sprint(v2)))
		}
	}
	for _, k := range []string{"instance-id", "uuid"} {
		if v, ok := md[k]; ok {
			switch x := v.(type) {
			case string, float64, int, bool:
				if x == "" {
					r.Add(join("meta_data", k), CodeInvalid, "meta_data %s is empty; it becomes the instance-id", k)
				}
			default:
				r.Add(join("meta_data", k), CodeInvalid, "meta_data %s must be a string (it becomes the instance-id), got %s", k, Quote(fmt.Sprint(v)))
			}
		}
	}
}
