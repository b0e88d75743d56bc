package encode

import (
	"fmt"
	"testing"
)

// Per-codec throughput on the real series: encode and decode MB/s on one
// core (b.SetBytes with the plain size). "delta" codes checkpoint k's chunk
// i against checkpoint k-1's chunk i; "base" codes the first checkpoint.
//
//	go test -run '^$' -bench 'Codec' ./encode/
func BenchmarkCodec(b *testing.B) {
	sets := benchSets(b)
	for _, s := range sets {
		for _, kind := range []string{"delta", "base"} {
			pairs := s.deltaPairs()
			if kind == "base" {
				pairs = s.basePairs()
			}
			plain := 0
			for _, p := range pairs {
				plain += len(p.plain)
			}
			for _, c := range Codecs() {
				name := fmt.Sprintf("%s/%s/%s", c, s.Name, kind)
				b.Run("enc/"+name, func(b *testing.B) {
					cd := NewCoder()
					b.SetBytes(int64(plain))
					var buf []byte
					for b.Loop() {
						for _, p := range pairs {
							buf, _ = cd.Encode(buf[:0], c, s.DType, p.plain, p.ref)
						}
					}
				})
				b.Run("dec/"+name, func(b *testing.B) {
					cd := NewCoder()
					encs := make([][]byte, len(pairs))
					for i, p := range pairs {
						var err error
						if encs[i], err = cd.Encode(nil, c, s.DType, p.plain, p.ref); err != nil {
							b.Fatal(err)
						}
					}
					b.SetBytes(int64(plain))
					var buf []byte
					for b.Loop() {
						for i, p := range pairs {
							var err error
							if buf, err = cd.Decode(buf[:0], encs[i], p.ref); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}
