package gpu

// XIDClass groups XID codes by what an operator does about them.
type XIDClass string

// XID classes, after NVIDIA's XID catalogue.
const (
	XIDClassApplication  XIDClass = "application"  // the job's own fault; the GPU is fine
	XIDClassMemory       XIDClass = "memory"       // ECC, page retirement, row remapping
	XIDClassInterconnect XIDClass = "interconnect" // PCIe, NVLink, C2C; 79 is "fallen off the bus"
	XIDClassDriver       XIDClass = "driver"       // driver, firmware, GSP, micro-controllers
	XIDClassVideo        XIDClass = "video"        // display and video engines
)

// WellKnownXIDs are the XID codes counted under their own number, with the
// class each belongs to, ascending. Every GPU gets a series for each of them
// from its first sample, at 0, so that the first occurrence is an increase a
// rule can see. XIDs outside this list are counted together under
// XIDOther, which starts at 0 too: the label set stays bounded and the first
// unusual XID is seen as well (the code itself is logged).
var WellKnownXIDs = []struct {
	Code  uint64
	Class XIDClass
}{
	{8, XIDClassDriver},         // GPU stopped processing (timeout)
	{13, XIDClassApplication},   // graphics engine exception
	{31, XIDClassApplication},   // GPU memory page fault
	{32, XIDClassDriver},        // invalid or corrupted push buffer stream
	{38, XIDClassDriver},        // driver firmware error
	{43, XIDClassApplication},   // GPU stopped processing
	{45, XIDClassApplication},   // preemptive cleanup after earlier errors
	{48, XIDClassMemory},        // double-bit ECC error
	{56, XIDClassVideo},         // display engine error
	{57, XIDClassMemory},        // error programming the video memory interface
	{58, XIDClassMemory},        // unstable video memory interface
	{61, XIDClassDriver},        // internal micro-controller breakpoint or warning
	{62, XIDClassDriver},        // internal micro-controller halt
	{63, XIDClassMemory},        // page retirement or row remapping recorded
	{64, XIDClassMemory},        // page retirement or row remapping failed
	{68, XIDClassVideo},         // video processor exception
	{69, XIDClassApplication},   // graphics engine class error
	{74, XIDClassInterconnect},  // NVLink error
	{79, XIDClassInterconnect},  // GPU has fallen off the bus
	{92, XIDClassMemory},        // high single-bit ECC error rate
	{94, XIDClassMemory},        // contained ECC error
	{95, XIDClassMemory},        // uncontained ECC error
	{109, XIDClassApplication},  // context switch timeout
	{119, XIDClassDriver},       // GSP RPC timeout
	{120, XIDClassDriver},       // GSP error
	{121, XIDClassInterconnect}, // C2C link error
	{140, XIDClassMemory},       // unrecovered ECC error
	{143, XIDClassDriver},       // GPU initialization failure
	{149, XIDClassInterconnect}, // NVLink fatal error
	{154, XIDClassDriver},       // GPU recovery action changed
	{155, XIDClassInterconnect}, // NVLink software-defined error
}

// XIDOther is the code under which XIDs outside WellKnownXIDs are counted.
// No XID has the number 0; the collector labels it code="other".
const XIDOther uint64 = 0

// IsWellKnownXID says whether code is in WellKnownXIDs.
func IsWellKnownXID(code uint64) bool {
	for _, x := range WellKnownXIDs {
		if x.Code == code {
			return true
		}
	}
	return false
}

// EventKinds are every event kind, in the order they are reported.
var EventKinds = []EventKind{EventXID, EventOOM, EventReconf}
