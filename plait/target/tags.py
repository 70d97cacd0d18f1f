"""The in-tree tags and their hardware facts. Every number names its source.

A microcontroller tag describes one chip: its clock, RAM and flash are the chip's datasheet values
(checked against the cited documents; a QEMU board only says where code runs). The host tags' facts
are measured on the running machine when first needed (:mod:`plait.target.host`), never numbers of
the machine this file was written on. Power figures are the weakest: the ones marked "recalled" come
from the datasheet's typical run-mode current as remembered, not re-checked here; "estimate" ones have
no datasheet figure behind them. Replace them with measurements when available.

Data only: the ``c`` backend declares :data:`C_TAGS`, the ``llvm`` backend :data:`LLVM_TAGS`
(``Backend.tags``); they are registered with their kind.
"""

from __future__ import annotations

from plait.target.facts import Fact
from plait.target.tag import TagDef

MHZ, KB, MW, BITS = "MHz", "KiB", "mW", "bits"
RECALLED = "recalled from the datasheet's typical run-mode current, not re-checked here"
ESTIMATE = "estimate, no datasheet figure behind it"

_CORTEX_M0 = TagDef(
    "cortex-m0", {"mcpu": "cortex-m0", "keys": ["arm_cpu"]},
    doc="Arm Cortex-M0, soft float: Nordic nRF51822 as on the BBC micro:bit v1 (QEMU board: microbit)",
    facts={
        "clock_mhz": Fact(16, MHZ, "nRF51822 product specification (16 MHz); RIOT nRF51822 board page"),
        "fpu": Fact("none", "", "Arm Cortex-M0 TRM (ARMv6-M, no FPU)"),
        "simd_bits": Fact(0, BITS, "ARMv6-M has no DSP/SIMD extension (Arm Cortex-M0 TRM)"),
        "ram_kb": Fact(16, KB, "nRF51822-QFAA; Zephyr bbc_microbit.yaml (ram: 16); "
                               "QEMU hw/arm/nrf51_soc.c (16 KiB SRAM)"),
        "flash_kb": Fact(256, KB, "nRF51822-QFAA; QEMU hw/arm/nrf51_soc.c: 256 KiB flash at 0x0"),
        "power_mw": Fact(13.2, MW, "nRF51822 PS v3.1: CPU running from flash at 16 MHz, ~4.4 mA x 3.0 V",
                         RECALLED),
        "cores": Fact(1, "", "nRF51822: one Cortex-M0"),
    },
)

_RP2040 = TagDef(
    "rp2040", {"mcpu": "cortex-m0plus", "keys": ["arm_cpu"]},
    doc="Arm Cortex-M0+, soft float, with room for real models: Raspberry Pi RP2040 as on the Raspberry Pi "
        "Pico (QEMU board: mps2-an385, whose Cortex-M3 runs ARMv6-M code unchanged)",
    facts={
        "clock_mhz": Fact(133, MHZ, "RP2040 datasheet: dual Cortex-M0+ at up to 133 MHz"),
        "fpu": Fact("none", "", "Arm Cortex-M0+ TRM (ARMv6-M, no FPU)"),
        "simd_bits": Fact(0, BITS, "ARMv6-M has no DSP/SIMD extension (Arm Cortex-M0+ TRM)"),
        "ram_kb": Fact(264, KB, "RP2040 datasheet: 264 kB of on-chip SRAM in six banks"),
        "flash_kb": Fact(2048, KB, "Raspberry Pi Pico datasheet: 2 MB QSPI flash (external to the RP2040, "
                                   "execute in place)"),
        "power_mw": Fact(66, MW, "RP2040 running one core at 133 MHz: ~20 mA x 3.3 V, order of magnitude",
                         ESTIMATE),
        "cores": Fact(2, "", "RP2040 datasheet: two Cortex-M0+ cores", "plait's code runs on one"),
    },
)

_CORTEX_M4F = TagDef(
    "cortex-m4f", {"mcpu": "cortex-m4f", "keys": ["arm_cpu"]},
    doc="Arm Cortex-M4 with single-precision FPU: ST STM32F407VG as on the STM32F4DISCOVERY "
        "(QEMU board: mps2-an386)",
    facts={
        "clock_mhz": Fact(168, MHZ, "STM32F407VG datasheet (DS8626); Zephyr stm32f4_disco board docs"),
        "fpu": Fact("sp", "", "Arm Cortex-M4 TRM: FPv4-SP single precision (gcc -mfpu=fpv4-sp-d16)"),
        "simd_bits": Fact(32, BITS, "ARMv7E-M DSP extension: 4x8 / 2x16-bit SIMD in 32-bit registers "
                                    "(Arm Cortex-M4 TRM); no float SIMD"),
        "ram_kb": Fact(192, KB, "STM32F407VG: 192 KB SRAM incl. 64 KB CCM (Zephyr stm32f4_disco board docs)"),
        "flash_kb": Fact(1024, KB, "STM32F407VG: 1 MB flash (Zephyr stm32f4_disco board docs)"),
        "power_mw": Fact(132, MW, "STM32F405/407 datasheet (DS8626): Run mode from flash, ART on, 168 MHz, "
                                  "peripherals off, ~40 mA x 3.3 V", RECALLED),
        "cores": Fact(1, "", "STM32F407VG: one Cortex-M4"),
    },
)

_CORTEX_M7F = TagDef(
    "cortex-m7f", {"mcpu": "cortex-m7f", "keys": ["arm_cpu"]},
    doc="Arm Cortex-M7 with single-precision FPU: ST STM32F746NG as on the 32F746GDISCOVERY "
        "(QEMU board: mps2-an500)",
    facts={
        "clock_mhz": Fact(216, MHZ, "STM32F746 overview (Linux Documentation/arch/arm/stm32); "
                                    "STM32F746NG datasheet (DS10916)"),
        "fpu": Fact("sp", "", "STM32F746: Cortex-M7 with FPv5 single precision "
                              "(gcc -mfpu=fpv5-sp-d16: GCC manual, ARM Options)"),
        "simd_bits": Fact(32, BITS, "ARMv7E-M DSP extension (Arm Cortex-M7 TRM); no float SIMD"),
        "ram_kb": Fact(320, KB, "STM32F746NG datasheet (DS10916): 320 KB SRAM incl. 64 KB DTCM, plus 16 KB "
                                "ITCM RAM for code (Zephyr stm32f746g_disco.yaml: ram 320)"),
        "flash_kb": Fact(1024, KB, "STM32F746NG datasheet (DS10916): 1 MB flash (Zephyr stm32f746g_disco.yaml)"),
        "power_mw": Fact(330, MW, "STM32F746 datasheet (DS10916): Run mode from flash at 216 MHz, "
                                  "peripherals off, ~100 mA x 3.3 V", RECALLED),
        "cores": Fact(1, "", "STM32F746NG: one Cortex-M7"),
    },
)

_CORTEX_M55 = TagDef(
    "cortex-m55", {"mcpu": "cortex-m55", "mfloat-abi": "hard", "keys": ["arm_cpu"]},
    doc="Arm Cortex-M55 with Helium (MVE): the high-performance core (RTSS-HP) of an Alif Ensemble E7 "
        "(AE722F80F55D5) (QEMU board: mps3-an547)",
    facts={
        "clock_mhz": Fact(400, MHZ, "Alif Ensemble RTSS-HP Cortex-M55 'up to 400 MHz' (Zephyr Alif Ensemble "
                                    "board docs)"),
        "fpu": Fact("sp", "", "Arm Cortex-M55 TRM: FPU and MVE-F with half/single precision vectors",
                    "scalar double precision is optional in the core configuration"),
        "simd_bits": Fact(128, BITS, "Helium (M-Profile Vector Extension): 128-bit vectors (Arm Cortex-M55 TRM)"),
        "ram_kb": Fact(1024, KB, "Alif Ensemble E7 RTSS-HP: 1 MB DTCM (Alif CMSIS pack M55_HP_map.h: DTCM = "
                                 "SRAM3, 1 MB)", "the 6.5 MB of SRAM0/SRAM1 shared with the other cores not counted"),
        "flash_kb": Fact(5632, KB, "Alif Ensemble E7 (AE722F80F55D5): 5.5 MB MRAM, execute in place (Alif "
                                   "regions_AE722F80F55D5LS_M55_HP.h: MRAM size 0x580000)",
                         "shared with the high-efficiency core"),
        "power_mw": Fact(40, MW, "Cortex-M55 MCU at 400 MHz, order of magnitude", ESTIMATE),
        "cores": Fact(1, "", "one Cortex-M55 core (the E7's other cores are separate pieces)"),
    },
)


def _host_facts(**fixed: Fact) -> dict[str, Fact]:
    """Facts of the machine plait runs on, measured when first needed; ``fixed`` ones (a SIMD width
    that an -mcpu level sets) replace the measured."""
    units = {"clock_mhz": MHZ, "fpu": "", "simd_bits": BITS, "ram_kb": KB, "flash_kb": KB, "power_mw": MW,
             "cores": "", "fma_bits": BITS}
    return {name: fixed.get(name, Fact.measured(name, unit)) for name, unit in units.items()}


_HOST = TagDef(
    "host", {"mcpu": "x86-64-v3"},
    doc="an x86-64 host with AVX2 + FMA (x86-64-v3) through LLVM",
    facts=_host_facts(simd_bits=Fact(256, BITS, "x86-64-v3: AVX2, 256-bit vectors (x86-64 psABI levels)")),
)

_HOST_LLVM = TagDef(
    "host-llvm", {},
    doc="this host through LLVM: any 'llvm' target without -mcpu (code for the host CPU)",
    facts=_host_facts(),
)

_HOST_C = TagDef(
    "host-c", {},
    doc="this host through its C compiler: any 'c' target without -mcpu/-march/-mfpu",
    facts=_host_facts(),
)

_X86_64_AVX512 = TagDef(
    "x86-64-avx512", {"mcpu": "x86-64-v4"},
    doc="an x86-64 host with AVX-512 (x86-64-v4) through LLVM",
    facts=_host_facts(simd_bits=Fact(512, BITS, "x86-64-v4: AVX-512, 512-bit vectors (x86-64 psABI levels)")),
)

C_TAGS = (_CORTEX_M0, _RP2040, _CORTEX_M4F, _CORTEX_M7F, _CORTEX_M55, _HOST_C)
LLVM_TAGS = (_HOST, _HOST_LLVM, _X86_64_AVX512)
