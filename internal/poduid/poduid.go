// Package poduid is a Kubernetes pod's UID, as the API gives it and as the
// kubelet names the pod's cgroup by it: 8-4-4-4-12 hex digits, or 32 of a
// static pod (the hash of its manifest), in any case; the kubelet's
// systemd cgroup driver writes the dashes as underscores.
package poduid

import (
	"regexp"
	"strings"
)

// pattern is a pod UID whose groups of hex digits are parted by sep.
func pattern(sep string) string {
	const h = `[0-9a-fA-F]`
	return h + `{8}` + sep + h + `{4}` + sep + h + `{4}` + sep + h + `{4}` + sep + h + `{12}|` + h + `{32}`
}

var (
	apiRE = regexp.MustCompile(`^(?:` + pattern("-") + `)$`)
	// pod<uid> in cgroupfs paths ("pod0f2c...-...") and systemd slices
	// ("kubepods-burstable-pod0f2c..._..._....slice")
	cgroupRE = regexp.MustCompile(`pod(` + pattern("[-_]") + `)(?:\.slice)?$`)
)

// Valid says whether s is a pod UID as the API gives it (with dashes), or
// a static pod's 32 hex digits.
func Valid(s string) bool { return apiRE.MatchString(s) }

// Static says whether s, a UID Valid takes, is a static pod's: the 32 hex
// digits of its manifest's hash, which the API server's mirror of the pod
// does not carry (its own UID is another).
func Static(s string) bool { return len(s) == 32 && apiRE.MatchString(s) }

// InCgroup is the pod UID a cgroup path's segment names at its end,
// "pod<uid>" or the systemd driver's "...-pod<uid>.slice", as written
// there (dashes or underscores, any case); "" where it names none.
func InCgroup(seg string) string {
	// (the expression runs only where its match is possible: it is slow,
	// and a process's path is parsed at every sample)
	if len(seg) < len("pod")+32 || !strings.Contains(seg, "pod") {
		return ""
	}
	if m := cgroupRE.FindStringSubmatch(seg); m != nil {
		return m[1]
	}
	return ""
}
