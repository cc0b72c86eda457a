package tenant

import "testing"

func TestGlob(t *testing.T) {
	tests := []struct {
		glob, s string
		want    bool
	}{
		{"chat-*", "chat-7f9c", true},
		{"chat-*", "search-1", false},
		{"/kubepods.slice/*pod1234_5678*", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/cri-containerd-ab.scope", true},
		{"vm-?", "vm-1", true},
		{"vm-?", "vm-12", false},
		{"vm-[0-3]", "vm-2", true},
		{"vm-[!0-3]", "vm-2", false},
		{"a.b", "axb", false},
		{"python*", "python3.11", true},
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYYcd", false},
		{"a*b*c", "abcabc", true},
		{"*pod*_*", "/kubepods-pod1_2.slice", true},
		{"?", "é", true},
		{"??", "é", false},
		{"x?z", "xéz", true},
		{"é*", "éa", true},
		{"abc", "ab", false},
		{"ab", "abc", false},
		{"*a", "bbb", false},
	}
	for _, tc := range tests {
		if got := globMatch(compileGlob(tc.glob), tc.s); got != tc.want {
			t.Errorf("glob %q on %q = %v, want %v", tc.glob, tc.s, got, tc.want)
		}
	}
}
