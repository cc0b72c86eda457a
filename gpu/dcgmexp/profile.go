package dcgmexp

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-kit/log/level"
)

// dcgm-exporter labels a MIG instance's series with its GPU_I_ID and the
// name of its GPU instance profile (GPU_I_PROFILE), as it read them at its
// start: after a MIG relayout it has not seen, a GPU_I_ID may be another
// instance's on the host. A series whose profile is not that of the
// host's instance at its GPU_I_ID (gpu.MIGInstance.Profile) is another
// instance's figures, and is left out.

// profileShape is the slices and memory (GB) a GPU instance profile's name
// gives ("3g.71gb", "1g.24gb+gfx"); ok false for a name that gives
// neither.
func profileShape(name string) (slices, gb int, ok bool) {
	sl, rest, found := strings.Cut(name, "g.")
	n, err := strconv.Atoi(sl)
	if !found || err != nil || n <= 0 {
		return 0, 0, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	m, err := strconv.Atoi(rest[:i])
	if err != nil || m <= 0 || !strings.HasPrefix(rest[i:], "gb") {
		return 0, 0, false
	}
	return n, m, true
}

// sameProfile says whether page (a series' GPU_I_PROFILE) can name the
// profile of the host's instance (host): the same slices, and memory
// within a quarter of the larger. The names are compared by shape only:
// the host's may be built without a variant's suffix
// (gpu.MIGInstance.ProfileBuilt), and names round the memory differently
// ("4g.95gb", "4g.96gb"), while one GPU's profiles of the same slices
// differ by twice the memory ("1g.10gb", "1g.20gb"). Where either name
// gives no shape ("" where not read or not labelled) no comparison is
// sound, and the series is taken as before.
func sameProfile(host, page string) bool {
	hs, hm, okHost := profileShape(host)
	ps, pm, okPage := profileShape(page)
	if !okHost || !okPage {
		return true
	}
	return hs == ps && 4*max(hm-pm, pm-hm) <= max(hm, pm)
}

// otherInstance is a MIG instance series left out: its GPU_I_PROFILE is
// not the profile of the host's instance at its GPU_I_ID.
type otherInstance struct {
	UUID          string
	GI            int
	Page, Profile string // the series' profile, the host instance's
}

// warnOtherInstances logs the series left out as other instances', at most
// once a minute per GPU and instance.
func (s *Source) warnOtherInstances(l []otherInstance) {
	for _, o := range l {
		if held, ok := s.allowWarn("profile", []string{fmt.Sprint(o.UUID, "/", o.GI)}); ok {
			level.Warn(s.logger).Log("msg", "dcgm-exporter series of a MIG instance whose GPU_I_PROFILE is not the profile of this host's instance at its GPU_I_ID (a MIG relayout dcgm-exporter has not seen: restart it); its figures left out (logged at most once a minute per instance)",
				"url", s.name, "uuid", o.UUID, "gpu_instance", o.GI, "page_profile", o.Page, "profile", o.Profile, "held", held)
		}
	}
}
