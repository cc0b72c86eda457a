package sim

import (
	"strings"
	"testing"
)

// TestFreeStringsBounded: a scenario's free strings are refused over their
// bound or with a character their kind does not allow, at their line,
// naming the field and its place; at the bound they load. Before, any
// string loaded: a 100,000-byte GPU UUID or tenant name was written on
// every row of the series (a 110 KB scenario wrote 100 MB of tenants.csv
// in 10 simulated seconds), and an escape sequence or a line break in a
// name reached the terminal through the tables.
func TestFreeStringsBounded(t *testing.T) {
	const dnn = "workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}"
	scenario := func(top, gpu, tenant string) string {
		return "name: x\n" + top + "gpus:\n  - {model: H100-SXM5-80GB" + gpu + "}\ntenants:\n  - {name: a, " + tenant + dnn + "}\n"
	}
	named := func(name string) string {
		return "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: " + name + ", " + dnn + "}\n"
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		name, src, want string
	}{
		{"tenant name at the bound", named(long(maxNameLen)), ""},
		{"tenant name past it", named(long(100_000)), `x.yaml:5: tenants[0].name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... is 100000 bytes long; at most 253`},
		{"tenant name with a comma and a line break", named(`"a,b\nc"`), `x.yaml:5: tenants[0].name "a,b\nc": use letters, digits, '_', '-', '.'`},
		{"tenant name with an escape", named(`"\e[31mRED\e[0m"`), `x.yaml:5: tenants[0].name "\x1b[31mRED\x1b[0m": use letters`},
		{"tenant name of every allowed kind", named("Chat_v1.2-b"), ""},
		{"scenario name with a line break", "name: \"x\\ny\"\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, " + dnn + "}\n", `x.yaml:1: name "x\ny": use printable ASCII (no control characters`},
		{"scenario name with spaces", "name: my scenario\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, " + dnn + "}\n", ""},
		{"GPU UUID at NVML's bound", scenario("", ", uuid: GPU-"+long(maxUUIDLen-4), ""), ""},
		{"GPU UUID past it", scenario("", ", uuid: GPU-"+long(maxUUIDLen-3), ""), "x.yaml:3: gpus[0].uuid \"GPU-aaaaaaaaaaaaaaaaaaaaaaaaaaaa\"... is 96 bytes long; at most 95"},
		{"GPU UUID with a line break", scenario("", `, uuid: "GPU-x,\"y\"\nz"`, ""), `x.yaml:3: gpus[0].uuid "GPU-x,\"y\"\nz": use printable ASCII without spaces`},
		{"GPU UUID with a space", scenario("", `, uuid: "GPU 1"`, ""), `gpus[0].uuid "GPU 1": use printable ASCII without spaces`},
		{"MIG UUID with a tab", scenario("", ", sharing: mig, mig: [{profile: 7g.80gb, uuid: \"MIG-\\t1\"}]", "mig_instance: 0, "), `x.yaml:3: gpus[0].mig[0].uuid "MIG-\t1": use printable ASCII without spaces`},
		{"executable with spaces", scenario("", "", `process: {executable: "/opt/my server/bin/serve"}, `), ""},
		{"executable with an escape", scenario("", "", `process: {executable: "vllm\e]0;x\a"}, `), `x.yaml:5: tenants[0].process.executable "vllm\x1b]0;x\a": use printable ASCII (no control`},
		{"executable past PATH_MAX", scenario("", "", "process: {executable: /"+long(maxPathLen)+"}, "), "tenants[0].process.executable \"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"... is 4096 bytes long; at most 4095"},
		{"cgroup with a line break", scenario("", "", `process: {cgroup: "/a\n/b"}, `), `x.yaml:5: tenants[0].process.cgroup "/a\n/b": use printable ASCII without spaces`},
		{"VM name with a line break", scenario("", ", sharing: vgpu", `vm: {name: "vm\nx"}, `), `x.yaml:5: tenants[0].vm.name "vm\nx": use UTF-8 without control characters or line breaks`},
		{"VM name in UTF-8 with spaces", scenario("", ", sharing: vgpu", `vm: {name: "VM café (prod) 東京"}, `), ""},
		{"VM name with a C1 control", scenario("", ", sharing: vgpu", `vm: {name: "vm\u009b31m"}, `), `x.yaml:5: tenants[0].vm.name "vm\u009b31m": use UTF-8 without control`},
		{"VM name with a line separator", scenario("", ", sharing: vgpu", `vm: {name: "vm\u2028x"}, `), `tenants[0].vm.name "vm\u2028x": use UTF-8 without control`},
		{"VM name in UTF-8 past the bound in bytes", scenario("", ", sharing: vgpu", "vm: {name: "+strings.Repeat("é", maxNameLen/2+1)+"}, "), "tenants[0].vm.name \"éééééééééééééééééééééééééééééééé\"... is 254 bytes long; at most 253"},
		{"VM name past the bound", scenario("", ", sharing: vgpu", "vm: {name: "+long(maxNameLen+1)+"}, "), "tenants[0].vm.name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"... is 254 bytes long; at most 253"},
		{"vGPU type past NVML's bound", scenario("", ", sharing: vgpu", "vm: {type: H100-"+long(maxVGPUTypeLen)+"}, "), "tenants[0].vm.type \"H100-aaaaaaaaaaaaaaaaaaaaaaaaaaa\"... is 68 bytes long; at most 63"},
		{"model name with a line break", "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, workload: {model_name: \"m\\nx\", type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\n", `x.yaml:5: tenants[0].workload.model_name "m\nx": use UTF-8 without control characters or line breaks`},
		{"model name in UTF-8", "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, workload: {model_name: \"modèle-ä\", type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\n", ""},
		{"model name with a slash and spaces", "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, workload: {model_name: meta-llama/Llama 3.1, type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) { wantParse(t, c.src, c.want) })
	}
}
