// Package reliability holds vmpayload's reliability and security suites.
// They run the real vmpayload binary (built once per test run, or taken from
// $VMPAYLOAD_BIN) against the libvirt test driver, and against the real
// libvirtd when VMPAYLOAD_LIBVIRTD=1:
//
//   - crash safety: SIGKILL the agent at seeded random moments while it works
//     through 1000 spooled jobs; every job ends with exactly one result;
//   - libvirtd restart: kill -9 libvirtd during a burst; all jobs finish;
//   - bad input: the corpus in test/testdata/bad through the spool and the
//     socket API, each case with its expected error field and code;
//   - resource limits: a full payload filesystem, request floods, queue bound;
//   - secrets and permissions: modes, groups, no plaintext in logs/results,
//     no escape from the secrets directory, no symlink following.
//
// docs/reliability.md lists the suites and the measured outcomes.
package reliability
