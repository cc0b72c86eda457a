//go:build kube

package kube

import (
	"regexp"
	"strconv"
	"strings"
)

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseMetrics reads the samples of a text exposition (comments and
// unparsable lines are skipped).
func parseMetrics(text string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n").Replace(l[2])
		}
		out = append(out, s)
	}
	return out
}

// series are the samples named name whose labels include match.
func series(samples []sample, name string, match map[string]string) []sample {
	var out []sample
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range match {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// value is the value of the one sample named name with labels match, and
// whether there is exactly one.
func value(samples []sample, name string, match map[string]string) (float64, bool) {
	s := series(samples, name, match)
	if len(s) != 1 {
		return 0, false
	}
	return s[0].value, true
}
