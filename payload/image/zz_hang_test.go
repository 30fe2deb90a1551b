package image
import "testing"
func TestZZHang(t *testing.T) { i, err := Inspect("/tmp/hang.img"); t.Log(i, err) }
