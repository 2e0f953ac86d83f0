/*
 * names.c — see names.h.  Guarantees: copies are all-or-nothing; sorting is bytewise.
 */
#include "names.h"

#include <stdlib.h>
#include <string.h>

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_items(char **items, int n)
{
    for (int i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

int zkl_names_copy_sorted(zkl_names *list, char *const *names, int n)
{
    char **items = calloc(n > 0 ? (size_t)n : 1, sizeof *items);
    if (!items)
        return -1;
    for (int i = 0; i < n; i++) {
        items[i] = strdup(names[i]);
        if (!items[i]) {
            free_items(items, i);
            return -1;
        }
    }
    qsort(items, (size_t)n, sizeof *items, name_cmp);
    zkl_names_free(list);
    list->items = items;
    list->count = n;
    return 0;
}

void zkl_names_free(zkl_names *list)
{
    free_items(list->items, list->count);
    list->items = NULL;
    list->count = 0;
}

int zkl_names_contains(const zkl_names *list, const char *name)
{
    if (list->count == 0)
        return 0;
    return bsearch(&name, list->items, (size_t)list->count, sizeof *list->items, name_cmp) !=
           NULL;
}

int zkl_names_equal(const zkl_names *a, const zkl_names *b)
{
    if (a->count != b->count)
        return 0;
    for (int i = 0; i < a->count; i++) {
        if (strcmp(a->items[i], b->items[i]) != 0)
            return 0;
    }
    return 1;
}
