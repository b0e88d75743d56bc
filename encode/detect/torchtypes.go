package detect

import "github.com/ckptfs/ckptfs/encode"

// elemType is how a torch storage's elements are laid out: the dtype the
// store should delta-code them as, and the element width in bytes.
//
// Non-float element types (int64 step counters, bool masks, quantised ints)
// are labelled DType Bytes: they still delta against their previous version
// under the same key, and the store codes them as bytes. Complex types are
// labelled with their component float type, since a complex64 storage is just
// interleaved float32 pairs and deltas as well as any float32 tensor.
type elemType struct {
	dtype encode.DType
	width int64
}

// storageTypes maps the names torch pickles as GLOBAL torch.<Name>Storage.
var storageTypes = map[string]elemType{
	"FloatStorage":         {encode.Float32, 4},
	"DoubleStorage":        {encode.Float64, 8},
	"HalfStorage":          {encode.Float16, 2},
	"BFloat16Storage":      {encode.BFloat16, 2},
	"ComplexFloatStorage":  {encode.Float32, 8},
	"ComplexDoubleStorage": {encode.Float64, 16},
	"LongStorage":          {encode.Bytes, 8},
	"IntStorage":           {encode.Bytes, 4},
	"ShortStorage":         {encode.Bytes, 2},
	"CharStorage":          {encode.Bytes, 1},
	"ByteStorage":          {encode.Bytes, 1},
	"BoolStorage":          {encode.Bytes, 1},
	"QInt8Storage":         {encode.Bytes, 1},
	"QUInt8Storage":        {encode.Bytes, 1},
	"QInt32Storage":        {encode.Bytes, 4},
	"QUInt4x2Storage":      {encode.Bytes, 1},
	"QUInt2x4Storage":      {encode.Bytes, 1},
	"UntypedStorage":       {encode.Bytes, 1},
}

// torchDTypes maps the names torch pickles as GLOBAL torch.<name> for a
// torch.dtype (newer torch passes the dtype beside an untyped storage).
var torchDTypes = map[string]elemType{
	"float32":    {encode.Float32, 4},
	"float":      {encode.Float32, 4},
	"float64":    {encode.Float64, 8},
	"double":     {encode.Float64, 8},
	"float16":    {encode.Float16, 2},
	"half":       {encode.Float16, 2},
	"bfloat16":   {encode.BFloat16, 2},
	"complex64":  {encode.Float32, 8},
	"cfloat":     {encode.Float32, 8},
	"complex128": {encode.Float64, 16},
	"cdouble":    {encode.Float64, 16},
	"int64":      {encode.Bytes, 8},
	"long":       {encode.Bytes, 8},
	"int32":      {encode.Bytes, 4},
	"int":        {encode.Bytes, 4},
	"int16":      {encode.Bytes, 2},
	"short":      {encode.Bytes, 2},
	"int8":       {encode.Bytes, 1},
	"uint8":      {encode.Bytes, 1},
	"bool":       {encode.Bytes, 1},
}

// tensorLabel is the label for a storage of type t: its float dtype if the
// byte length is a whole number of elements of that dtype, else Bytes.
func tensorLabel(key string, t encode.DType, length int64) Label {
	if t != encode.Bytes && length%int64(t.Width()) != 0 {
		t = encode.Bytes
	}
	return Label{Kind: Tensor, Key: key, DType: t}
}
