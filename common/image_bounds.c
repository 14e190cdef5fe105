/* Measuring an image that came from the network (see cr_image_measure_bounded). */
#include <string.h>

#include "error.h"
#include "fatbin.h"
#include "image_internal.h"

int cr_image_measure_bounded(const void *data, size_t avail, size_t *size)
{
    const uint8_t *p = data;
    uint32_t magic;
    if (!p || avail < 4)
        return CR_ECORRUPT;
    memcpy(&magic, p, 4);
    /* nvcc's wrapper holds a pointer into its own process: from the network it is an
     * address the measuring (and NVIDIA's driver) would follow; clients send the container */
    if (magic == CR_FATBIN_WRAPPER_MAGIC)
        return CR_ECORRUPT;
    if (magic == CR_FATBIN_MAGIC) {
        uint16_t header;
        uint64_t payload;
        if (avail < 16)
            return CR_ECORRUPT;
        memcpy(&header, p + 6, 2);
        memcpy(&payload, p + 8, 8);
        if (header < 16 || payload > CR_IMAGE_MAX_SIZE - header)
            return CR_ECORRUPT;
        *size = (size_t)header + (size_t)payload;
        return 0;
    }
    if (magic == CR_ELF_MAGIC)
        return cr__elf_measure(p, avail, size);
    const uint8_t *nul = memchr(p, 0, avail); /* PTX: text up to and including its NUL */
    if (!nul)
        return CR_ECORRUPT;
    *size = (size_t)(nul - p) + 1;
    return 0;
}
