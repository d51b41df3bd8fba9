"""embedding_alltoall.py — TODO (issue 6): fco::embedding_alltoall, NOT registered yet.

Waits for fco_embedding_alltoall in include/fco.h (src/ops/embedding_alltoall.c). When it
lands, this file follows allreduce.py:
  - _lib.bind("fco_embedding_alltoall", [...]) with the header's argument list;
  - @torch.library.custom_op("fco::embedding_alltoall", mutates_args=()): this rank's tables
    (model-parallel), the global batch's indices/offsets for them (embedding bag, sum pooling)
    → this rank's slice of the batch with every table's pooled vector (data-parallel layout of
    the DLRM interaction): the same output as pooled lookup + all_to_all_single + permute;
    index tensors are int64/int32 (check them: out-of-range indices are reported by the C op
    as FCO_ERR_INVALID_ARGUMENT, never read out of bounds);
  - fake impl from the shapes alone (batch / P rows, num_tables_total × dim);
  - autograd: reverse all-to-all of grad_out (torch.distributed all_to_all_single, or the C
    op's baseline) then table-gradient accumulation (index_add_ of the pooled grads into
    each bag's rows; a dense grad the size of the local tables);
  - wrapper fco.embedding_alltoall(tables, indices, offsets, group=None, impl="auto");
  - tests/python/test_embedding_alltoall.py against the plain-torch pipeline (embedding_bag,
    all_to_all_single, permute), gradcheck-style checks against torch's autograd of it.
"""
