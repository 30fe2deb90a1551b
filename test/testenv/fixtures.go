package testenv

// KeyAlice is the SSH public key test jobs give their first user
// ("alice@example"; golden files hold it).
const KeyAlice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBU9sScwddkdLvHgCn4qYcytsLm/8/Gn/jhDNSszVo+M alice@example"

// HashA is the SHA-512 crypt password hash test jobs give a user
// (password_hash; golden files hold it).
const HashA = "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG."
