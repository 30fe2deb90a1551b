package ignition_test

// job.Parse validates with the field table of package payload/kinds.
import _ "github.com/vmpayload/vmpayload/payload/kinds/register"
