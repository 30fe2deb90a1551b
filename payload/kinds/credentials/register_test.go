package credentials_test

// Linking every kind: job.Validate asks each kind's checks (kinds.RegisterCheck),
// which only payload/kinds/register links in.
import _ "github.com/vmpayload/vmpayload/payload/kinds/register"
