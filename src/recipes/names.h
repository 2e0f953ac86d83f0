/*
 * names.h — a list of znode child names owned by a recipe: copied out of an op's result,
 * sorted bytewise (strcmp compares unsigned chars, as kazoo's Python sorts UTF-8), compared
 * and searched.  No state beyond the list itself; nothing here talks to ZooKeeper.
 *
 * Guarantees: a list is either fully copied or left untouched (copy returns -1 and the old
 * list stays); zkl_names_free() leaves an empty list that may be reused.
 */
#ifndef ZKL_RECIPES_NAMES_H
#define ZKL_RECIPES_NAMES_H

typedef struct zkl_names {
    char **items;
    int count;
} zkl_names;

/* Replaces *list with a sorted copy of names[0..n): 0, or -1 when out of memory. */
int zkl_names_copy_sorted(zkl_names *list, char *const *names, int n);
void zkl_names_free(zkl_names *list);
/* Whether the sorted list holds name (binary search). */
int zkl_names_contains(const zkl_names *list, const char *name);
/* Whether two sorted lists hold the same names. */
int zkl_names_equal(const zkl_names *a, const zkl_names *b);

#endif
