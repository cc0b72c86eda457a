package webui

import (
	"html"
	"strings"
	"testing"
)

// Text from outside reaches the tuner page: a GPU's name and error, a
// decision's reason (a hook's stderr, a daemon's reply, a pod's name), a
// round's why, a VM's name. Whatever it holds, it is text on the page and
// in its JSON: no element, attribute or script of its own, in any of the
// contexts it lands in (element text, attribute values, an SVG title).
func TestTunerPageHostileText(t *testing.T) {
	for _, evil := range []string{
		`"><script>alert(1)</script>`,
		`' onmouseover='alert(1)`,
		`" onmouseover="alert(1)`,
		`</title><img src=x onerror=alert(1)>`,
		"\u2028<!--x",
	} {
		t.Run(evil, func(t *testing.T) {
			snap, st := pageSnapshot(), pageStatus()
			snap.Readings.Devices[0].Name = evil
			snap.Readings.Devices[1].Up, snap.Readings.Devices[1].Err = false, evil
			snap.Tenants[2].Name = evil
			snap.Usage[1].Tenant = evil
			for i := range st.Recent {
				st.Recent[i].Reason, st.Recent[i].Guard, st.Recent[i].Tenant = evil, evil, evil
			}
			for i := range st.GPUs {
				st.GPUs[i].Why = evil
			}
			for i := range st.Settings {
				st.Settings[i].Tenant = evil
			}
			_, body, _ := getPage(t, snap, st, "/tuner")
			// markup characters escaped wherever the text lands: the text
			// as given is nowhere on the page, its escaped form is
			if strings.Contains(body, evil) {
				i := strings.Index(body, evil)
				t.Errorf("page holds the text unescaped: %s", body[max(0, i-80):min(len(body), i+80)])
			}
			if esc := html.EscapeString(evil); !strings.Contains(body, esc) {
				t.Errorf("page lacks the escaped text %q", esc)
			}
			_, js, _ := getPage(t, snap, st, "/tuner?format=json")
			if strings.ContainsAny(js, "<>") {
				t.Errorf("JSON holds < or >, which a browser sniffing it as HTML would read")
			}
		})
	}
}
