from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from portal.accounts.models import ApiToken, User


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    list_display = ["username", "email", "uid_number", "is_staff", "last_login"]
    readonly_fields = ["uid_number", "gid_number", "home_directory", "ldap_groups"]
    fieldsets = [*UserAdmin.fieldsets, ("Directory", {"fields": readonly_fields})]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
