"""bench/kernel_names.py: the table names call_timeline.py gives profiler kernel names (CPU only)."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import kernel_names  # noqa: E402


@pytest.mark.parametrize(
    "demangled, short",
    [
        # Parameters holding "(anonymous namespace)" and commas: the name came out as "RowCut const*, unsigned int*)".
        ("ignis::cuda::(anonymous namespace)::count_values_kernel(unsigned short const*, int, int, unsigned int*, "
         "unsigned int*)", "count_values_kernel"),
        ("void ignis::cuda::(anonymous namespace)::find_cut_kernel<ignis::cuda::(anonymous namespace)::Bf16Bits>("
         "unsigned int const*, unsigned int*, ignis::cuda::(anonymous namespace)::RowCut*, unsigned long long, int)",
         "find_cut_kernel"),
        ("void ignis::cuda::(anonymous namespace)::scan_kernel<__nv_bfloat16>(__nv_bfloat16 const*, int*, "
         "ignis::cuda::(anonymous namespace)::Job)", "scan_kernel"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >("
         "int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "vectorized_elementwise_kernel"),
        ("void spin_kernel(long)", "spin_kernel"),
        ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD"),
    ],
)
def test_short_name_is_the_function_name(demangled, short):
    assert kernel_names.short_name(demangled) == short
