# Data, sampler and checkpoint sources (owned by the data work). They use only
# libc, zlib and vgpu_common, so tests build them without the launcher.
set(VGPU_DATA_SOURCES dataset.c dataset_text.c sampler.c checkpoint.c checkpoint_dir.c)
