"""What ``grade compare`` measures for exercise 10 (reading fusion): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from typing import Callable

from grader.compare.specs import ExerciseSpec, Measurement, call


# Optimized HLO of one fixed program (relu(x @ w + 1), three loop steps of tanh(c) * 0.5 +
# sum(c, 0), then exp(h - max(h))), f32[16,32] @ f32[32,24], from JAX 0.10.2 on CPU with
# metadata and source tables trimmed: a kCustom dot, kLoop fusions in ENTRY and in the loop's
# body and condition, reductions whose adders are named by to_apply.  Once with the default
# pipeline, once with "fusion,fusion-wrapper" disabled (bare elementwise work left in ENTRY).
_HLO_DEFAULT = '''HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[16,32]{1,0}, f32[32,24]{1,0})->f32[16,24]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

FileNames
1 "fixed.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=0 end_column=1}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_computation.1 (param_0.2: f32[24], param_1.4: f32[16,24]) -> f32[16,24] {
  %param_1.4 = f32[16,24]{1,0} parameter(1)
  %tanh.2 = f32[16,24]{1,0} tanh(%param_1.4)
  %constant.3 = f32[] constant(0.5)
  %mul.5 = f32[16,24]{1,0} broadcast(%constant.3), dimensions={}
  %mul.4 = f32[16,24]{1,0} multiply(%tanh.2, %mul.5)
  %param_0.2 = f32[24]{0} parameter(0)
  %add.5 = f32[16,24]{1,0} broadcast(%param_0.2), dimensions={1}
  ROOT %add.4 = f32[16,24]{1,0} add(%mul.4, %add.5)
}

%wrapped_add_computation (param_0.7: s32[], param_1.11: s32[]) -> s32[] {
  %param_0.7 = s32[] parameter(0)
  %param_1.11 = s32[] parameter(1)
  ROOT %add.15 = s32[] add(%param_0.7, %param_1.11)
}

%region_1.2 (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
  %reduce_sum.3 = f32[] parameter(0)
  %reduce_sum.4 = f32[] parameter(1)
  ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
}

%wrapped_reduce_computation (param_0.8: f32[16,24], param_1.12: f32[]) -> f32[24] {
  %param_0.8 = f32[16,24]{1,0} parameter(0)
  %param_1.12 = f32[] parameter(1)
  ROOT %reduce_sum.1 = f32[24]{0} reduce(%param_0.8, %param_1.12), dimensions={0}, to_apply=%region_1.2
}

%region_0.4 (arg_tuple.1: (s32[], f32[16,24])) -> (s32[], f32[16,24]) {
  %arg_tuple.1 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.10 = s32[] constant(1)
  %constant.1 = f32[] constant(0)
  %get-tuple-element.5 = f32[16,24]{1,0} get-tuple-element(%arg_tuple.1), index=1
  %get-tuple-element.4 = s32[] get-tuple-element(%arg_tuple.1), index=0
  %wrapped_reduce = f32[24]{0} fusion(%get-tuple-element.5, %constant.1), kind=kLoop, calls=%wrapped_reduce_computation
  %wrapped_add = s32[] fusion(%get-tuple-element.4, %constant.10), kind=kLoop, calls=%wrapped_add_computation
  %broadcast_add_fusion = f32[16,24]{1,0} fusion(%wrapped_reduce, %get-tuple-element.5), kind=kLoop, calls=%fused_computation.1
  ROOT %tuple.3 = (s32[], f32[16,24]{1,0}) tuple(%wrapped_add, %broadcast_add_fusion)
}

%wrapped_compare_computation (param_0.9: s32[], param_1.13: s32[]) -> pred[] {
  %param_0.9 = s32[] parameter(0)
  %param_1.13 = s32[] parameter(1)
  ROOT %lt.0 = pred[] compare(%param_0.9, %param_1.13), direction=LT
}

%region_2.5 (arg_tuple.3: (s32[], f32[16,24])) -> pred[] {
  %arg_tuple.3 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.12 = s32[] constant(3)
  %get-tuple-element.6 = s32[] get-tuple-element(%arg_tuple.3), index=0
  ROOT %wrapped_compare = pred[] fusion(%get-tuple-element.6, %constant.12), kind=kLoop, calls=%wrapped_compare_computation
}

%fused_computation (param_0: f32[16,32], param_1: f32[32,24]) -> f32[16,24] {
  %param_0 = f32[16,32]{1,0} parameter(0)
  %param_1 = f32[32,24]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[16,24]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_computation.2 (param_0.4: f32[16,24], param_1.6: f32[16]) -> f32[16,24] {
  %param_0.4 = f32[16,24]{1,0} parameter(0)
  %param_1.6 = f32[16]{0} parameter(1)
  %sub.1 = f32[16,24]{1,0} broadcast(%param_1.6), dimensions={0}
  %sub.0 = f32[16,24]{1,0} subtract(%param_0.4, %sub.1)
  ROOT %exp.0 = f32[16,24]{1,0} exponential(%sub.0)
}

%fused_computation.3 (param_0.6: f32[16,24]) -> f32[16,24] {
  %param_0.6 = f32[16,24]{1,0} parameter(0)
  %constant.6 = f32[] constant(1)
  %add.14 = f32[16,24]{1,0} broadcast(%constant.6), dimensions={}
  %add.10 = f32[16,24]{1,0} add(%param_0.6, %add.14)
  %constant.5 = f32[] constant(0)
  %max.5 = f32[16,24]{1,0} broadcast(%constant.5), dimensions={}
  ROOT %max.4 = f32[16,24]{1,0} maximum(%add.10, %max.5)
}

%region_3.6 (reduce_max.3: f32[], reduce_max.4: f32[]) -> f32[] {
  %reduce_max.3 = f32[] parameter(0)
  %reduce_max.4 = f32[] parameter(1)
  ROOT %reduce_max.5 = f32[] maximum(%reduce_max.3, %reduce_max.4)
}

%wrapped_reduce_computation.1 (param_0.10: f32[16,24], param_1.14: f32[]) -> f32[16] {
  %param_0.10 = f32[16,24]{1,0} parameter(0)
  %param_1.14 = f32[] parameter(1)
  ROOT %reduce_max.0 = f32[16]{0} reduce(%param_0.10, %param_1.14), dimensions={1}, to_apply=%region_3.6
}

ENTRY %main.7 (x.1: f32[16,32], w.1: f32[32,24]) -> f32[16,24] {
  %x.1 = f32[16,32]{1,0} parameter(0)
  %w.1 = f32[32,24]{1,0} parameter(1)
  %constant.14 = f32[] constant(-inf)
  %constant.15 = s32[] constant(0)
  %ynn_fusion = f32[16,24]{1,0} fusion(%x.1, %w.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %copy.6 = s32[] copy(%constant.15)
  %broadcast_maximum_fusion = f32[16,24]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%fused_computation.3
  %tuple = (s32[], f32[16,24]{1,0}) tuple(%copy.6, %broadcast_maximum_fusion)
  %while.5 = (s32[], f32[16,24]{1,0}) while(%tuple), condition=%region_2.5, body=%region_0.4, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"3"}}
  %while.7 = f32[16,24]{1,0} get-tuple-element(%while.5), index=1
  %wrapped_reduce.1 = f32[16]{0} fusion(%while.7, %constant.14), kind=kLoop, calls=%wrapped_reduce_computation.1
  ROOT %subtract_exponential_fusion = f32[16,24]{1,0} fusion(%while.7, %wrapped_reduce.1), kind=kLoop, calls=%fused_computation.2
}
'''

_HLO_UNFUSED = '''HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[16,32]{1,0}, f32[32,24]{1,0})->f32[16,24]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

FileNames
1 "fixed.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=0 end_column=1}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%region_1.2 (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
  %reduce_sum.3 = f32[] parameter(0)
  %reduce_sum.4 = f32[] parameter(1)
  ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
}

%region_0.4 (arg_tuple.1: (s32[], f32[16,24])) -> (s32[], f32[16,24]) {
  %arg_tuple.1 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.10 = s32[] constant(1)
  %constant.0 = f32[] constant(0.5)
  %constant.1 = f32[] constant(0)
  %get-tuple-element.5 = f32[16,24]{1,0} get-tuple-element(%arg_tuple.1), index=1
  %get-tuple-element.4 = s32[] get-tuple-element(%arg_tuple.1), index=0
  %mul.0 = f32[16,24]{1,0} broadcast(%constant.0), dimensions={}
  %reduce_sum.0 = f32[24]{0} reduce(%get-tuple-element.5, %constant.1), dimensions={0}, to_apply=%region_1.2
  %tanh.0 = f32[16,24]{1,0} tanh(%get-tuple-element.5)
  %add.11 = s32[] add(%get-tuple-element.4, %constant.10)
  %add.2 = f32[16,24]{1,0} broadcast(%reduce_sum.0), dimensions={1}
  %mul.1 = f32[16,24]{1,0} multiply(%tanh.0, %mul.0)
  %add.3 = f32[16,24]{1,0} add(%mul.1, %add.2)
  ROOT %tuple.3 = (s32[], f32[16,24]{1,0}) tuple(%add.11, %add.3)
}

%region_2.5 (arg_tuple.3: (s32[], f32[16,24])) -> pred[] {
  %arg_tuple.3 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.12 = s32[] constant(3)
  %get-tuple-element.6 = s32[] get-tuple-element(%arg_tuple.3), index=0
  ROOT %lt.1 = pred[] compare(%get-tuple-element.6, %constant.12), direction=LT
}

%region_3.6 (reduce_max.3: f32[], reduce_max.4: f32[]) -> f32[] {
  %reduce_max.3 = f32[] parameter(0)
  %reduce_max.4 = f32[] parameter(1)
  ROOT %reduce_max.5 = f32[] maximum(%reduce_max.3, %reduce_max.4)
}

%fused_computation (param_0: f32[16,32], param_1: f32[32,24]) -> f32[16,24] {
  %param_0 = f32[16,32]{1,0} parameter(0)
  %param_1 = f32[32,24]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[16,24]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main.7 (x.1: f32[16,32], w.1: f32[32,24]) -> f32[16,24] {
  %x.1 = f32[16,32]{1,0} parameter(0)
  %w.1 = f32[32,24]{1,0} parameter(1)
  %constant.13 = f32[] constant(1)
  %constant.14 = f32[] constant(-inf)
  %constant.15 = s32[] constant(0)
  %constant.2 = f32[] constant(0)
  %ynn_fusion = f32[16,24]{1,0} fusion(%x.1, %w.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %add.12 = f32[16,24]{1,0} broadcast(%constant.13), dimensions={}
  %copy.6 = s32[] copy(%constant.15)
  %max.0 = f32[16,24]{1,0} broadcast(%constant.2), dimensions={}
  %add.13 = f32[16,24]{1,0} add(%ynn_fusion, %add.12)
  %max.1 = f32[16,24]{1,0} maximum(%add.13, %max.0)
  %tuple = (s32[], f32[16,24]{1,0}) tuple(%copy.6, %max.1)
  %while.5 = (s32[], f32[16,24]{1,0}) while(%tuple), condition=%region_2.5, body=%region_0.4, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"3"}}
  %while.7 = f32[16,24]{1,0} get-tuple-element(%while.5), index=1
  %reduce_max.7 = f32[16]{0} reduce(%while.7, %constant.14), dimensions={1}, to_apply=%region_3.6
  %sub.6 = f32[16,24]{1,0} broadcast(%reduce_max.7), dimensions={0}
  %sub.7 = f32[16,24]{1,0} subtract(%while.7, %sub.6)
  ROOT %exp.1 = f32[16,24]{1,0} exponential(%sub.7)
}
'''


def _hlo_reader_calls(target: str) -> Callable[[], dict]:
    def payload() -> dict:
        return {"kind": "value", "target": target, "numpy": True, "calls": [call(_HLO_DEFAULT), call(_HLO_UNFUSED)]}
    return payload


def _rewrites_calls() -> dict:
    return {"kind": "value", "target": "rewrites", "numpy": True, "calls": [call()]}


SPEC = ExerciseSpec(
    "reading-fusion",
    (Measurement("fusions", _hlo_reader_calls("fusions"), False),
     Measurement("unfused", _hlo_reader_calls("unfused"), False),
     Measurement("rewrites", _rewrites_calls, False)),
    source_functions=("fusions", "unfused"),
    note="fusions and unfused by their normalised source (HLO readers have no jaxpr); their output on "
         "two fixed optimized modules and rewrites() for the side-by-side view")
