package cloudinit_test

// The kinds answer package job's questions (job.SetKinds) and render their
// own documents: linking them in makes the package's tests render as the
// agent does.
import _ "github.com/vmpayload/vmpayload/payload/kinds/register"
