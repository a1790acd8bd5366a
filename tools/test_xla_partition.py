#!/usr/bin/env python3
"""test_xla_partition.py - checks xla_partition.py's reading of XLA's output
(replica-group forms, loop trip counts, bytes) on module text XLA printed.
Needs no jax: the texts below are copied from XLA 0.10.2's dumps after its
spmd-partitioning pass.  Run: python3 tools/test_xla_partition.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xla_partition as xp  # noqa: E402

# lax.scan over 4 layers: x f32[8,64] replicated, ws f32[4,64,64] split on its
# last dim over 8 devices (XLA all-gathers the carry once per trip).
SCAN = """HloModule jit_f, num_partitions=8

%region_0.3_spmd (param: (s32[], f32[8,8], f32[4,64,8])) -> (s32[], f32[8,8], f32[4,64,8]) {
  %param = (s32[], f32[8,8]{1,0}, f32[4,64,8]{2,1,0}) parameter(0)
  %get-tuple-element = s32[] get-tuple-element(%param), index=0
  %constant.4.clone = s32[] constant(1)
  %add.0 = s32[] add(%get-tuple-element, %constant.4.clone)
  %get-tuple-element.1 = f32[8,8]{1,0} get-tuple-element(%param), index=1
  %all-gather = f32[8,64]{1,0} all-gather(%get-tuple-element.1), channel_id=1, replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, dimensions={1}, use_global_device_ids=true
  %get-tuple-element.2 = f32[4,64,8]{2,1,0} get-tuple-element(%param), index=2
  %constant.1 = s32[] constant(0)
  %dynamic-slice = f32[1,64,8]{2,1,0} dynamic-slice(%get-tuple-element.2, %get-tuple-element, %constant.1, %constant.1), dynamic_slice_sizes={1,64,8}
  %squeeze.2 = f32[64,8]{1,0} reshape(%dynamic-slice)
  %dot = f32[8,8]{1,0} dot(%all-gather, %squeeze.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %tanh.2 = f32[8,8]{1,0} tanh(%dot)
  ROOT %tuple = (s32[], f32[8,8]{1,0}, f32[4,64,8]{2,1,0}) tuple(%add.0, %tanh.2, %get-tuple-element.2)
}

%region_1.4_spmd (param.1: (s32[], f32[8,8], f32[4,64,8])) -> pred[] {
  %param.1 = (s32[], f32[8,8]{1,0}, f32[4,64,8]{2,1,0}) parameter(0)
  %get-tuple-element.6 = s32[] get-tuple-element(%param.1), index=0
  %constant.6.clone = s32[] constant(4)
  ROOT %lt.0 = pred[] compare(%get-tuple-element.6, %constant.6.clone), direction=LT
}

ENTRY %main.5_spmd (param.2: f32[8,64], param.3: f32[4,64,8]) -> f32[8,64] {
  %constant.7.clone = s32[] constant(0)
  %param.2 = f32[8,64]{1,0} parameter(0), sharding={replicated}
  %dynamic-slice.2 = f32[8,8]{1,0} slice(%param.2), slice={[0:8], [0:8]}
  %param.3 = f32[4,64,8]{2,1,0} parameter(1), sharding={devices=[1,1,8]<=[8]}
  %tuple.2 = (s32[], f32[8,8]{1,0}, f32[4,64,8]{2,1,0}) tuple(%constant.7.clone, %dynamic-slice.2, %param.3)
  %while = (s32[], f32[8,8]{1,0}, f32[4,64,8]{2,1,0}) while(%tuple.2), condition=%region_1.4_spmd, body=%region_0.3_spmd
  %get-tuple-element.8 = f32[8,8]{1,0} get-tuple-element(%while), index=1
  ROOT %all-gather.1 = f32[8,64]{1,0} all-gather(%get-tuple-element.8), channel_id=2, replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, dimensions={1}, use_global_device_ids=true
}
"""


class ReplicaGroups(unittest.TestCase):
    def groups(self, attrs):
        return xp.replica_groups(attrs + ", use_global_device_ids=true", 8)[0]

    def test_explicit_and_empty(self):
        self.assertEqual(self.groups("replica_groups={{0,1,2,3},{4,5,6,7}}"),
                         [[0, 1, 2, 3], [4, 5, 6, 7]])
        self.assertEqual(self.groups("replica_groups={}"), [list(range(8))])

    def test_iota(self):
        # iota(8).reshape(2,4).T = [[0,4],[1,5],[2,6],[3,7]]
        self.assertEqual(self.groups("replica_groups=[4,2]<=[2,4]T(1,0)"),
                         [[0, 4], [1, 5], [2, 6], [3, 7]])
        # iota(8).reshape(2,2,2).transpose(1,0,2): [i,j,k] = 4j+2i+k
        self.assertEqual(self.groups("replica_groups=[4,2]<=[2,2,2]T(1,0,2)"),
                         [[0, 1], [4, 5], [2, 3], [6, 7]])

    def test_mesh_whole_axis(self):
        self.assertEqual(self.groups("replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}"),
                         [list(range(8))])
        # 2x1x4 mesh, groups along the major axis of 2: devices 4 apart.
        self.assertEqual(self.groups("replica_groups=mesh['axis_0'=2,'axis_1'=1,'axis_2'=4] {'axis_0'}"),
                         [[0, 4], [1, 5], [2, 6], [3, 7]])

    def test_mesh_device_ids(self):
        # Mesh 4x2 holding iota(8).reshape(2,4).T = [[0,4],[1,5],[2,6],[3,7]];
        # groups along axis_1 are its rows (the form the old reader took for
        # one group of all 8 devices).
        self.assertEqual(
            self.groups("replica_groups=mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0)) {'axis_1'}"),
            [[0, 4], [1, 5], [2, 6], [3, 7]])

    def test_mesh_sub_axis(self):
        # Mesh 4x2 = iota(8).reshape(2,2,2).transpose(0,2,1).reshape(4,2)
        #          = [[0,2],[1,3],[4,6],[5,7]]; axis_0 = (major 2) x (minor 2);
        # 'axis_0':(2)2 is the minor factor: rows 0/1 and rows 2/3 pair up.
        self.assertEqual(
            self.groups("replica_groups=mesh['axis_0'=4,'axis_1'=2], device_ids=([2,2,2]T(0,2,1)) {'axis_0':(2)2}"),
            [[0, 1], [2, 3], [4, 5], [6, 7]])


class Collectives(unittest.TestCase):
    def test_scan_trip_count(self):
        rows = xp.collectives(SCAN, 8)
        self.assertEqual([r["instruction"] for r in rows], ["all-gather", "all-gather.1"])
        body, last = rows
        # all-gather f32[8,8] -> f32[8,64] over 8: 7/8 * 2,048 = 1,792 bytes a trip, 4 trips.
        self.assertEqual(body["bytes_per_trip"], 1792)
        self.assertEqual(body["multiplier"], 4)
        self.assertEqual(body["bytes_per_device"], 7168)
        self.assertIn("4 loop trips", body["loop"])
        self.assertEqual((last["multiplier"], last["bytes_per_device"], last["loop"]), (1, 1792, ""))

    def test_unknown_trip_count(self):
        text = SCAN.replace("%constant.7.clone = s32[] constant(0)",
                            "%constant.7.clone = s32[] parameter(2)")
        body = xp.collectives(text, 8)[0]
        self.assertEqual((body["multiplier"], body["bytes_per_device"]), (1, 1792))
        self.assertIn("unknown trip count", body["loop"])

    def test_known_trip_count_config(self):
        text = SCAN.replace("body=%region_0.3_spmd",
                            'body=%region_0.3_spmd, backend_config={"known_trip_count":{"n":"6"}}')
        self.assertEqual(xp.collectives(text, 8)[0]["bytes_per_device"], 6 * 1792)

    def test_permute_self_pairs_send_nothing(self):
        text = """HloModule m
ENTRY %e (p: f32[4,16]) -> f32[4,16] {
  %p = f32[4,16]{1,0} parameter(0)
  %a = f32[4,16]{1,0} collective-permute(%p), channel_id=1, source_target_pairs={{0,0},{1,1}}
  ROOT %b = f32[4,16]{1,0} collective-permute(%a), channel_id=2, source_target_pairs={{0,1},{1,0}}
}
"""
        rows = xp.collectives(text, 2)
        self.assertEqual([r["bytes_per_device"] for r in rows], [0, 256])   # 4*16*4 = 256


if __name__ == "__main__":
    unittest.main()
