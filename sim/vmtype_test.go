package sim

import "testing"

// TestVMTypeOfTheGPU: a vGPU VM's type that names its framebuffer must be
// one of its GPU's: the model's prefix and a framebuffer the GPU has.
// Before, H200-141C on an H100 or H100-500C loaded, giving the VM more
// framebuffer than the GPU (a tenant of 100 GiB then failed only at its
// start, as an OOM). A type that names no size is of unknown size.
func TestVMTypeOfTheGPU(t *testing.T) {
	scenario := func(vm string) string {
		return "gpus:\n  - model: H100-SXM5-80GB\n    sharing: vgpu\ntenants:\n  - name: a\n    memory: 3GiB\n    vm: " + vm + "\n    workload: {type: training, flops: 1e12}\n"
	}
	checkLoads(t, scenario, []loadCase{
		{"the default", "{weight: 1}", ""},
		{"a C type", "{type: H100-20C}", ""},
		{"the whole GPU", "{type: H100-80C}", ""},
		{"a Q type", "{type: H100-4Q}", ""},
		{"more than the GPU", "{type: H100-500C}", `x.yaml:7: vm.type "H100-500C" is no vGPU type of an H100-SXM5-80GB: H100-<N>C, N GB of framebuffer, N from 1 to 80`},
		{"another GPU's", "{type: H200-141C}", `x.yaml:7: vm.type "H200-141C" is no vGPU type`},
		{"no framebuffer", "{type: H100-0C}", `x.yaml:7: vm.type "H100-0C" is no vGPU type`},
		{"a type of no size", "{type: H100-custom}", ""},
	})
}
