package cloudinit

// Internals the external tests (package cloudinit_test) check.
var HashPassword = hashPassword

const SaltAlphabet = saltAlphabet
