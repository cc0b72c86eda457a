package kube

import (
	"strings"
	"testing"
)

func TestParsePodListErrors(t *testing.T) {
	if _, _, err := parsePodList("x.json", []byte("{not json")); err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Errorf("err = %v", err)
	}
}
