"""Notebook 10's drawings (analytic, nothing measured): the 128-byte swizzle, the wgmma descriptor's
bit fields, the producer/consumer protocol of rungs 3-5 as a schematic timeline, and one slot's mbarrier
phases and the parity each wait passes."""
from __future__ import annotations

from course_lib.models import hopper


def swizzle_figure():
    """A K-major tile's first 8 rows: where each 16-byte chunk (8 bf16 along K) is in the tile, and
    where the TMA's 128-byte swizzle puts it in shared memory."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, title, swizzled in ((axes[0], "in the matrix: row r, chunk c", False),
                                (axes[1], "in shared memory: chunk c of row r at c ^ (r % 8)", True)):
        for r in range(hopper.SWIZZLE_PERIOD_ROWS):
            for c in range(8):
                pos = hopper.swizzled_chunk(r, c) if swizzled else c
                ax.add_patch(plt.Rectangle((pos, 7 - r), 0.95, 0.9, color=cmap(c), alpha=0.75))
                ax.text(pos + 0.47, 7 - r + 0.45, f"k{8 * c}", ha="center", va="center", fontsize=7)
        ax.set_xlim(0, 8)
        ax.set_ylim(0, 8)
        ax.set_xticks([i + 0.47 for i in range(8)])
        ax.set_xticklabels([f"{16 * i}" for i in range(8)], fontsize=7)
        ax.set_yticks([i + 0.45 for i in range(8)])
        ax.set_yticklabels([f"row {7 - i}" for i in range(8)], fontsize=7)
        ax.set_xlabel("byte offset within the 128-byte row", fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle("The 128-byte swizzle (schematic): the 8 rows a wgmma k16 step reads (chunks k0 and k8) "
                 "fall in 8 different bank groups", fontsize=9)
    fig.tight_layout()
    return fig


def descriptor_figure(desc: int):
    """The 64 bits of one descriptor, field by field, with their values."""
    import matplotlib.pyplot as plt

    decode = hopper.decode_descriptor(desc)
    spans = [(0, 14, "start address / 16", decode["start address"] >> 4),
             (16, 30, "leading byte offset / 16", decode["leading byte offset"] >> 4),
             (32, 46, "stride byte offset / 16", decode["stride byte offset"] >> 4),
             (49, 52, "base", decode["base offset"]),
             (62, 64, "swizzle", hopper.SWIZZLE_MODES[decode["swizzle"]])]
    fig, ax = plt.subplots(figsize=(10, 1.6))
    ax.add_patch(plt.Rectangle((0, 0), 64, 1, color="#eeeeee"))
    for (lo, hi, name, value), colour in zip(spans, ("#4c72b0", "#dd8452", "#55a868", "#8172b2", "#c44e52")):
        ax.add_patch(plt.Rectangle((64 - hi, 0), hi - lo, 1, color=colour, alpha=0.8))
        ax.text(64 - (lo + hi) / 2, 0.5, f"{name}\n= {value}", ha="center", va="center", fontsize=7, color="white")
    ax.set_xlim(0, 64)
    ax.set_ylim(0, 1)
    ax.set_xticks([64 - b for b in (0, 14, 16, 30, 32, 46, 49, 52, 62, 64)])
    ax.set_xticklabels([str(b) for b in (0, 14, 16, 30, 32, 46, 49, 52, 62, 64)], fontsize=7)
    ax.set_yticks([])
    ax.set_title(f"wgmma shared-memory descriptor 0x{desc:016x} (bit 63 on the left)", fontsize=9)
    fig.tight_layout()
    return fig


def protocol_figure(slots: int = 4, k_tiles: int = 7, load: float = 3.0, math: float = 1.0):
    """Rungs 3-5's roles as a schematic timeline: the producer waits for empty[s] and asks the TMA
    for slot s; both consumer warpgroups wait for full[s], issue wgmma, wait for it, arrive on
    empty[s]. Times are in units of one slot's math (a schematic, not a measurement)."""
    import matplotlib.pyplot as plt

    lanes = ["producer: 1 thread", "TMA → slot", "consumer warpgroup 1", "consumer warpgroup 2"]
    issue, land, start, free = {}, {}, {}, {}
    t_math = 0.0
    for kt in range(k_tiles):
        issue[kt] = 0.0 if kt < slots else free[kt - slots]
        land[kt] = issue[kt] + load
        start[kt] = max(land[kt], t_math)
        t_math = start[kt] + math
        free[kt] = t_math
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(10, 3.6))
    slot_y = {s: 2.2 + s * 1.6 / slots for s in range(slots)}   # the TMA lane, one row per slot
    for kt in range(k_tiles):
        s = kt % slots
        ax.add_patch(plt.Rectangle((issue[kt], 4.15), 0.25, 0.7, color=cmap(s)))
        ax.add_patch(plt.Rectangle((issue[kt], slot_y[s]), load, 1.4 / slots, color=cmap(s), alpha=0.4))
        ax.text(issue[kt] + load / 2, slot_y[s] + 0.7 / slots, f"K tile {kt} → slot {s}", ha="center",
                va="center", fontsize=6)
        for lane_y in (1.2, 0.2):
            ax.add_patch(plt.Rectangle((start[kt], lane_y), math * 0.95, 0.6, color=cmap(s), alpha=0.8))
            ax.text(start[kt] + math / 2, lane_y + 0.3, "wgmma", ha="center", va="center", fontsize=6, color="white")
        ax.annotate("", xy=(start[kt], 1.85), xytext=(land[kt], slot_y[s]),
                    arrowprops=dict(arrowstyle="->", color="grey", lw=0.6))
        if kt + slots < k_tiles:
            ax.annotate("", xy=(free[kt], 4.15), xytext=(free[kt], 1.8),
                        arrowprops=dict(arrowstyle="->", color=cmap(s), lw=0.6, ls="--"))
    ax.set_yticks([4.5, 3.0, 1.5, 0.5])
    ax.set_yticklabels(lanes, fontsize=8)
    ax.set_ylim(0, 5)
    ax.set_xlim(0, max(free.values()) + 0.5)
    ax.set_xlabel("time, in units of one slot's math (schematic)", fontsize=8)
    ax.set_title(f"{slots} slots: grey arrows = full[s] completes (bytes landed); dashed = both consumers "
                 "arrived on empty[s], so the producer refills it", fontsize=9)
    fig.tight_layout()
    return fig


def parity_figure(stages: int = 4, passes: int = 4, slot: int = 0):
    """One slot's two mbarriers over its first ``passes`` uses (tiles slot, slot + stages, ...): each phase of
    full[s] and empty[s] as a band, shaded by its parity, and every wait with the parity it passes
    (models.hopper.ring_parities). A schematic: one pass is one time unit; nothing is measured."""
    import matplotlib.pyplot as plt

    land, freed = 0.35, 0.85            # within a pass: the bytes land, then both consumers have arrived
    shade = {0: "#c6dbef", 1: "#2171b5"}
    ink = {0: "#08306b", 1: "white"}
    fig, ax = plt.subplots(figsize=(10, 3.9))
    rows = {"producer (1 thread)": 4.0, "full[s]: 1 arrival + the bytes": 3.0,
            "consumers (2 warpgroups)": 2.0, "empty[s]: 2 arrivals": 1.0}
    origin = -0.15                      # where each barrier's phase 0 begins (after mbarrier.init)
    ax.add_patch(plt.Rectangle((-0.85, 0.7), 0.68, 0.6, fill=False, hatch="///", ec="#6b8fb5"))
    ax.text(-0.51, 1.0, "phase −1:\ncomplete\nfrom init", ha="center", va="center", fontsize=6.5, color="#08306b")
    for y, done in ((3.0, land), (1.0, freed)):
        start = origin
        for p in range(passes):
            end = p + done
            ax.add_patch(plt.Rectangle((start, y - 0.3), end - start, 0.6, color=shade[p & 1], ec="white"))
            ax.text((start + end) / 2, y, f"phase {p}, parity {p & 1}", ha="center", va="center", fontsize=7,
                    color=ink[p & 1])
            ax.plot([end, end], [y - 0.38, y + 0.38], color="black", lw=1.2)
            start = end
        ax.add_patch(plt.Rectangle((start, y - 0.3), passes - 0.05 - start, 0.6, color=shade[passes & 1],
                                   ec="white", alpha=0.5))
    for p in range(passes):
        j = slot + p * stages
        full_parity, empty_parity = hopper.ring_parities(j, stages)
        # The producer's wait on empty[s] returns when the slot's previous phase completes; it asks the TMA.
        ready = p - 1 + freed if p else origin
        ax.annotate("", xy=(ready, 3.8), xytext=(ready, 1.38),
                    arrowprops=dict(arrowstyle="->", color="#c44e52", lw=0.8, ls="--"))
        ax.add_patch(plt.Rectangle((ready, 3.8), p + land - ready, 0.3, color="#c44e52", alpha=0.6))
        ax.text(ready + 0.03, 4.3, f"tile {j}: wait(empty, {empty_parity})", fontsize=7,
                color="#a03040", va="center")
        # The consumers' wait on full[s] returns when this pass's phase completes; they multiply, then arrive.
        ax.annotate("", xy=(p + land, 2.3), xytext=(p + land, 2.62),
                    arrowprops=dict(arrowstyle="->", color="#55a868", lw=0.8))
        ax.text(p + land + 0.02, 2.45, f"wait(full, {full_parity})", fontsize=7, color="#2d6a3e", va="center")
        ax.add_patch(plt.Rectangle((p + land, 1.85), freed - land, 0.3, color="#55a868", alpha=0.8))
        ax.text(p + (land + freed) / 2, 2.0, "wgmma", fontsize=6, color="white", ha="center", va="center")
        ax.annotate("", xy=(p + freed, 1.38), xytext=(p + freed, 1.85),
                    arrowprops=dict(arrowstyle="->", color="#55a868", lw=0.8))
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels(list(rows), fontsize=8)
    ax.set_xticks([p + 0.5 for p in range(passes)])
    ax.set_xticklabels([f"pass {p}: tile {slot + p * stages}" for p in range(passes)], fontsize=8)
    ax.set_xlim(-0.9, passes)
    ax.set_ylim(0.5, 4.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"Slot {slot} of a {stages}-slot ring (schematic). A phase completes when its arrivals and bytes "
                 "are in (black tick).\nwait(bar, P) returns once the phase of parity P has completed. Consumers: "
                 "P = pass & 1 on full; producer: (pass & 1) ^ 1 on empty", fontsize=8.5)
    fig.tight_layout()
    return fig
