package job_test

// The field table lives in package payload/kinds (job.SetKinds): linking
// it in makes the package's own tests validate as the agent does.
import _ "github.com/vmpayload/vmpayload/payload/kinds/register"
