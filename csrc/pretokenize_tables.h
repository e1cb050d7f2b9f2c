/*
 * pretokenize_tables.h — the generated Unicode class tables (unicode_tables.c)
 * as the pre-tokenizer reads them.
 */
#ifndef TIKTOKEN_INC_PRETOKENIZE_TABLES_H
#define TIKTOKEN_INC_PRETOKENIZE_TABLES_H

#include <stdint.h>

#define TKI_CLASS_LETTER 1u      /* \p{L}                              */
#define TKI_CLASS_NUMBER 2u      /* \p{N}                              */
#define TKI_CLASS_SPACE 4u       /* \s                                 */
#define TKI_CLASS_UPPER_LIKE 8u  /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]    */
#define TKI_CLASS_LOWER_LIKE 16u /* [\p{Ll}\p{Lm}\p{Lo}\p{M}]          */

#define TKI_UNICODE_BLOCK_BITS 7

extern const uint16_t tki_unicode_stage1[0x110000 >> TKI_UNICODE_BLOCK_BITS];
extern const uint8_t tki_unicode_stage2[][1u << TKI_UNICODE_BLOCK_BITS];

static inline uint8_t tki_unicode_class(uint32_t code_point) {
    if (code_point >= 0x110000u) {
        return 0;
    }
    return tki_unicode_stage2[tki_unicode_stage1[code_point >> TKI_UNICODE_BLOCK_BITS]]
                             [code_point & ((1u << TKI_UNICODE_BLOCK_BITS) - 1u)];
}

#endif /* TIKTOKEN_INC_PRETOKENIZE_TABLES_H */
