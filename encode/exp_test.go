package encode

import (
	"os"
	"strconv"
	"testing"
)

func TestMain(m *testing.M) {
	if v := os.Getenv("FSEBIAS"); v != "" {
		fseBias, _ = strconv.ParseFloat(v, 64)
	}
	os.Exit(m.Run())
}
